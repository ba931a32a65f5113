// A real single-node Slurm cluster for tests (Debian's slurm-wlm and munge, installed by
// scripts/setup.sh --test): munged, slurmctld and slurmd started in a temporary folder with their
// own key, config, state, ports (loopback, picked free) and logs, as this process's children. The
// test holds their pids and stops them by pid (SIGTERM, then SIGKILL after a bounded wait), never
// by name. env() is what a client command needs (SLURM_CONF). Waits are bounded in count and time.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QHostAddress>
#include <QProcess>
#include <QTcpServer>
#include <QDir>
#include <QFile>
#include <QTemporaryDir>

#include <chrono>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/common/subprocess.h"

namespace slurm_test {

inline int free_loopback_port() {
  QTcpServer s;
  return s.listen(QHostAddress::LocalHost, 0) ? s.serverPort() : 0;
}

class SlurmCluster {
public:
  // Starts the three daemons; error() says why when it could not (then ok() is false).
  SlurmCluster() {
    if (!dir_.isValid()) {
      fail("no temporary folder");
      return;
    }
    root_ = dir_.path().toStdString();
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    host_ = std::string(host).substr(0, std::string(host).find('.'));
    if (!write_munge_key() || !write_config()) return;
    const std::string m = root_ + "/munge";
    if (!start(munged_, "munged", {"-F", "-f", "--socket=" + m + "/munge.sock", "--key-file=" + m + "/munge.key",
                                   "--pid-file=" + m + "/munged.pid", "--log-file=" + m + "/munged.log",
                                   "--seed-file=" + m + "/munged.seed"}))
      return;
    if (!wait_for([&] { return QFile::exists(QString::fromStdString(m + "/munge.sock")); })) {
      fail("munged made no socket: " + log("munge/munged.log"));
      return;
    }
    if (!start(ctld_, "slurmctld", {"-D", "-f", conf()})) return;
    if (!start(slurmd_, "slurmd", {"-D", "-f", conf()})) return;
    // Up when the node is idle: the controller answers and the node has registered.
    if (!wait_for([&] {
          const auto r = grpo::run_command({"sinfo", "-h", "-o", "%T"}, {10, 1 << 16, env()});
          return r.ok() && r.out.find("idle") != std::string::npos;
        })) {
      fail("the node never became idle: " + log("slurmctld.log") + " / " + log("slurmd.log"));
      return;
    }
    ok_ = true;
  }
  ~SlurmCluster() {
    // Jobs run under slurmstepd, which outlives slurmd by design: cancel this cluster's jobs
    // (through its own controller) and wait, bounded, until none is left running.
    if (ok_) {
      grpo::run_command({"scancel", "--partition=test"}, {10, 1 << 16, env()});
      wait_for([&] {
        const auto r = grpo::run_command({"squeue", "-h", "-t", "running,completing", "-o", "%i"}, {10, 1 << 16, env()});
        return !r.ok() || r.out.find_first_not_of(" \n") == std::string::npos;
      });
    }
    for (QProcess* p : {&slurmd_, &ctld_, &munged_}) stop(*p);
  }
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  std::string conf() const { return root_ + "/slurm.conf"; }
  std::vector<std::string> env() const { return {"SLURM_CONF=" + conf()}; }
  const std::string& root() const { return root_; }
  std::string log(const std::string& name) const {
    std::ifstream f(root_ + "/" + name);
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
  }

private:
  void fail(const std::string& why) { error_ = why; }

  bool write_munge_key() {
    QDir().mkpath(QString::fromStdString(root_ + "/munge"));
    ::chmod((root_ + "/munge").c_str(), 0700);
    std::random_device rd;
    std::string key(1024, '\0');
    for (auto& c : key) c = static_cast<char>(rd());
    std::ofstream(root_ + "/munge/munge.key", std::ios::binary) << key;
    ::chmod((root_ + "/munge/munge.key").c_str(), 0400);
    return true;
  }

  bool write_config() {
    const int ctld_port = free_loopback_port(), slurmd_port = free_loopback_port();
    if (!ctld_port || !slurmd_port || ctld_port == slurmd_port) {
      fail("no free loopback ports");
      return false;
    }
    for (const char* d : {"/state", "/spool"}) QDir().mkpath(QString::fromStdString(root_ + d));
    std::ofstream c(conf());
    c << "ClusterName=grpotest\nSlurmctldHost=" << host_ << "(127.0.0.1)\nSlurmUser=root\nSlurmdUser=root\n"
      << "SlurmctldPort=" << ctld_port << "\nSlurmdPort=" << slurmd_port << "\n"
      << "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=" << root_ << "/munge/munge.sock\n"
      << "StateSaveLocation=" << root_ << "/state\nSlurmdSpoolDir=" << root_ << "/spool\n"
      << "SlurmctldPidFile=" << root_ << "/slurmctld.pid\nSlurmdPidFile=" << root_ << "/slurmd.pid\n"
      << "SlurmctldLogFile=" << root_ << "/slurmctld.log\nSlurmdLogFile=" << root_ << "/slurmd.log\n"
      << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
      << "AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\nMpiDefault=none\n"
      << "SchedulerType=sched/builtin\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
      << "ReturnToService=2\nMinJobAge=600\nSlurmctldDebug=info\nSlurmdDebug=info\n"
      << "NodeName=" << host_ << " NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN\n"
      << "PartitionName=test Nodes=" << host_ << " Default=YES MaxTime=INFINITE State=UP\n";
    return c.good();
  }

  bool start(QProcess& p, const char* program, const std::vector<std::string>& args) {
    QStringList a;
    for (const auto& s : args) a << QString::fromStdString(s);
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    e.insert("SLURM_CONF", QString::fromStdString(conf()));
    p.setProcessEnvironment(e);
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.setStandardOutputFile(QString::fromStdString(root_ + "/" + program + ".out"));
    // A test killed before its destructor runs (a watchdog, ctest's timeout) still ends its
    // daemons: the kernel sends them SIGTERM when it dies. Workers left under slurmstepd then give
    // up on their unreachable trainer by themselves (grpo worker --join-give-up).
    p.setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGTERM); });
    p.start(program, a);
    if (!p.waitForStarted(10000)) {
      fail(std::string(program) + " did not start: " + p.errorString().toStdString());
      return false;
    }
    started_.push_back(&p);
    return true;
  }

  // Polls `cond` every 100 ms, at most 300 times (30 s), while the daemons live.
  template <class F>
  bool wait_for(F cond) {
    for (int i = 0; i < 300; ++i) {
      for (const QProcess* p : started_)
        if (p->state() == QProcess::NotRunning) return false;  // a daemon died: its log says why
      if (cond()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  static void stop(QProcess& p) {
    const qint64 pid = p.processId();
    if (pid <= 0 || p.state() == QProcess::NotRunning) return;
    ::kill(static_cast<pid_t>(pid), SIGTERM);
    if (!p.waitForFinished(10000)) {
      ::kill(static_cast<pid_t>(pid), SIGKILL);
      p.waitForFinished(5000);
    }
  }

  QTemporaryDir dir_;
  std::string root_, host_, error_;
  QProcess munged_, ctld_, slurmd_;
  std::vector<const QProcess*> started_;
  bool ok_ = false;
};

}  // namespace slurm_test
