// The Slurm launcher (core/cluster/slurm.h) against a real single-node Slurm cluster
// (slurm_cluster.h: munged, slurmctld and slurmd started here, stopped by pid), and its parsing
// and checks against what an attacker or a typo could hand it. The bounded command runner it uses
// (core/common/subprocess.h) is checked here too. Every wait is bounded in count and time.
#include <QTemporaryDir>
#include <QtTest>

#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "core/cluster/slurm.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/subprocess.h"
#include "slurm_cluster.h"

using grpo::cluster::JobState;
using grpo::cluster::JobTask;
using grpo::cluster::WorkerLaunch;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const grpo::Error& e) {
    return e.what();
  }
  return "(no error)";
}

WorkerLaunch launch_in(const std::string& dir, std::vector<std::string> command, int count = 1) {
  WorkerLaunch l;
  l.count = count;
  l.job_name = "grpo-test";
  l.command = std::move(command);
  l.script_dir = dir + "/scripts";
  l.log_dir = dir + "/logs";
  return l;
}

// Polls `job` every 100 ms, at most 600 times (60 s), until `done` holds for its tasks.
template <class Done>
std::vector<JobTask> poll_until(grpo::cluster::WorkerLauncher& s, const std::string& job, Done done) {
  std::vector<JobTask> tasks;
  for (int i = 0; i < 600; ++i) {
    tasks = s.poll(job);
    if (done(tasks)) return tasks;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return tasks;
}

bool all_in(const std::vector<JobTask>& tasks, size_t n, JobState state) {
  if (tasks.size() != n) return false;
  for (const auto& t : tasks)
    if (t.state != state) return false;
  return true;
}

std::string describe(const std::vector<JobTask>& tasks) {
  std::string s;
  for (const auto& t : tasks) s += t.id + ":" + t.state_text + "(" + t.reason + ") ";
  return s;
}

}  // namespace

class TestSlurm : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void commandsRunWithEveryLimit() {
    auto r = grpo::run_command({"sh", "-c", "echo out; echo err >&2; exit 3"});
    QCOMPARE(r.exit_code, 3);
    QCOMPARE(r.out, std::string("out\n"));
    QCOMPARE(r.describe(), std::string("exit 3: err"));
    // A deadline kills the command and what it started (its process group) and reaps it.
    const auto t0 = std::chrono::steady_clock::now();
    r = grpo::run_command({"sh", "-c", "sleep 30 & sleep 30"}, {0.3, 1 << 20, {}});
    QVERIFY(r.timed_out && !r.ok());
    QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
    // Output past the cap is read and dropped: the child never blocks on a full pipe.
    r = grpo::run_command({"sh", "-c", "head -c 3000000 /dev/zero"}, {30, 1000, {}});
    QVERIFY(r.ok() && r.truncated);
    QCOMPARE(r.out.size(), size_t(1000));
    r = grpo::run_command({"sh", "-c", "echo $GRPO_X"}, {30, 1000, {"GRPO_X=seen"}});
    QCOMPARE(r.out, std::string("seen\n"));
    QVERIFY(error_of([] { grpo::run_command({"/nonexistent/grpo-no-such-tool"}); }).find("cannot run it") != std::string::npos);
    QVERIFY(error_of([] { grpo::run_command({}); }).find("no program") != std::string::npos);
  }

  // What a typo or an attacker could put in a launch is refused, naming the field.
  void launchesAreCheckedBeforeSbatchSeesThem() {
    auto l = launch_in("/tmp/x", {"grpo", "worker"});
    QVERIFY(error_of([&] { grpo::cluster::check_worker_launch(l); }) == "(no error)");
    auto bad = [&](auto change, const char* field) {
      WorkerLaunch b = l;
      change(b);
      const std::string e = error_of([&] { grpo::cluster::check_worker_launch(b); });
      QVERIFY2(e.find(std::string("field \"") + field + "\"") != std::string::npos, e.c_str());
    };
    bad([](WorkerLaunch& b) { b.count = 0; }, "count");
    bad([](WorkerLaunch& b) { b.count = 1001; }, "count");
    bad([](WorkerLaunch& b) { b.partition = "gpu\n#SBATCH --uid=0"; }, "partition");
    bad([](WorkerLaunch& b) { b.gres = "gpu:1 --wrap=x"; }, "gres");
    bad([](WorkerLaunch& b) { b.time_limit = "1 day"; }, "time_limit");
    bad([](WorkerLaunch& b) { b.mem = "16GB; rm"; }, "mem");
    bad([](WorkerLaunch& b) { b.job_name = "../x"; }, "job_name");
    bad([](WorkerLaunch& b) { b.extra_options = {"rm -rf /"}; }, "extra_options");
    bad([](WorkerLaunch& b) { b.extra_options = {"--array=0-9999"}; }, "extra_options");
    bad([](WorkerLaunch& b) { b.extra_options = {"--comment=a\nb"}; }, "extra_options");
    bad([](WorkerLaunch& b) { b.extra_options.assign(33, "--exclusive"); }, "extra_options");
    bad([](WorkerLaunch& b) { b.command = {}; }, "command");
    bad([](WorkerLaunch& b) { b.command = {std::string("a\0b", 3)}; }, "command");
    bad([](WorkerLaunch& b) { b.log_dir = "logs"; }, "log_dir");
    // Values reach sbatch as arguments of its own, the worker's words as single-quoted words.
    l.partition = "gpu";
    l.time_limit = "1-02:00:00";
    l.extra_options = {"--exclusive", "--comment=a b'c"};
    l.command = {"grpo", "worker", "--model", "/m/it's here"};
    const auto args = grpo::cluster::sbatch_arguments(l, "/tmp/x/s.sbatch");
    QVERIFY(std::find(args.begin(), args.end(), "--partition=gpu") != args.end());
    QVERIFY(std::find(args.begin(), args.end(), "--comment=a b'c") != args.end());
    QCOMPARE(args.back(), std::string("/tmp/x/s.sbatch"));
    const std::string script = grpo::cluster::worker_batch_script(l);
    QVERIFY2(script.find("exec 'grpo' 'worker' '--model' '/m/it'\\''s here'\n") != std::string::npos, script.c_str());
    QVERIFY(script.find("#SBATCH") == std::string::npos);
  }

  void squeueAnswersAreParsedWithLimits() {
    const auto t = grpo::cluster::parse_squeue(
        "12_[2-5]|PENDING|Resources|(null)|1:00:00\n12_0|RUNNING|None|node7|59:58\n12_1|CANCELLED|None|node8|0:00\n", "12");
    QCOMPARE(t.size(), size_t(3));
    QCOMPARE(t[0].id, std::string("12_[2-5]"));
    QVERIFY(t[0].state == JobState::Pending && t[0].node.empty() && t[0].reason == "Resources");
    QVERIFY(t[1].state == JobState::Running && t[1].node == "node7");
    QVERIFY(grpo::cluster::job_state_ended(t[2].state));
    QVERIFY(grpo::cluster::job_state_from("SOMETHING_NEW") == JobState::Other);
    QVERIFY(grpo::cluster::parse_squeue("", "12").empty());
    for (const char* garbage : {"12_0|RUNNING|None|n\n", "13_0|RUNNING|None|n|1:00\n", "12_0x|RUNNING|None|n|1\n"})
      QVERIFY2(error_of([&] { grpo::cluster::parse_squeue(garbage, "12"); }).find("squeue") != std::string::npos, garbage);
    QVERIFY(error_of([] { grpo::cluster::parse_squeue(std::string(5000, 'x') + "\n", "12"); }).find("4 KiB") != std::string::npos);
    std::string flood;
    for (int i = 0; i < 100001; ++i) flood += "12_1|RUNNING|None|n|1\n";
    QVERIFY(error_of([&] { grpo::cluster::parse_squeue(flood, "12"); }).find("100,000") != std::string::npos);
    QVERIFY(error_of([] { grpo::cluster::parse_squeue("", "12|x"); }).find("not a job id") != std::string::npos);
    QCOMPARE(grpo::cluster::parse_sbatch_job_id("4242\n"), std::string("4242"));
    QCOMPARE(grpo::cluster::parse_sbatch_job_id("4242;cluster-a\n"), std::string("4242"));
    QVERIFY(error_of([] { grpo::cluster::parse_sbatch_job_id("Submitted batch job 4242"); }).find("job id") != std::string::npos);
  }

  // The real thing: a job array runs one task per worker, each seen pending or running and then
  // completed; a long job is cancelled; sbatch's refusal reaches the user with its reason.
  void launchPollAndCancelOnARealCluster() {
    slurm_test::SlurmCluster cluster;
    QVERIFY2(cluster.ok(), cluster.error().c_str());
    grpo::cluster::SlurmLauncher slurm({"", 30, cluster.env()});
    const std::string dir = cluster.root() + "/run";

    auto l = launch_in(dir, {"sh", "-c", "echo \"task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID\" > \"$0/out-$SLURM_ARRAY_TASK_ID\"", dir}, 2);
    const std::string job = slurm.submit(l);
    QVERIFY(grpo::cluster::is_job_id(job));
    struct stat st {};
    QCOMPARE(::stat((dir + "/scripts/grpo-test.sbatch").c_str(), &st), 0);
    QCOMPARE(st.st_mode & 0777, 0700u);
    const auto done = poll_until(slurm, job, [](const auto& t) { return all_in(t, 2, JobState::Completed); });
    QVERIFY2(all_in(done, 2, JobState::Completed), describe(done).c_str());
    for (int i = 0; i < 2; ++i)
      QCOMPARE(grpo::read_file(dir + "/out-" + std::to_string(i)), "task " + std::to_string(i) + " of " + job + "\n");

    auto sleeper = launch_in(dir, {"sleep", "300"});
    sleeper.job_name = "grpo-sleeper";
    sleeper.time_limit = "10";
    const std::string long_job = slurm.submit(sleeper);
    auto running = poll_until(slurm, long_job, [](const auto& t) { return all_in(t, 1, JobState::Running); });
    QVERIFY2(all_in(running, 1, JobState::Running), describe(running).c_str());
    QVERIFY(!running[0].node.empty());
    slurm.cancel(long_job);
    auto cancelled = poll_until(slurm, long_job, [](const auto& t) { return all_in(t, 1, JobState::Cancelled); });
    QVERIFY2(all_in(cancelled, 1, JobState::Cancelled), describe(cancelled).c_str());

    auto nowhere = launch_in(dir, {"true"});
    nowhere.partition = "no-such-partition";
    const std::string e = error_of([&] { slurm.submit(nowhere); });
    QVERIFY2(e.find("sbatch") != std::string::npos && e.find("nvalid partition") != std::string::npos, e.c_str());
    QVERIFY(error_of([&] { slurm.cancel("1; rm -rf /"); }).find("not a job id") != std::string::npos);
    grpo::cluster::SlurmLauncher missing({"/nonexistent", 5, cluster.env()});
    QVERIFY(error_of([&] { missing.poll(job); }).find("cannot run it") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestSlurm)
#include "test_slurm.moc"
