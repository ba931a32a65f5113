// Router internals shared by router.cpp (dispatch) and router_join.cpp (joining, adapter
// broadcasts): the per-worker and per-batch state, and small helpers. Include only from those.
#pragma once

#include <QEventLoop>
#include <QNetworkReply>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster/router.h"
#include "core/cluster/worker_client.h"
#include "core/common/timing.h"

namespace grpo::cluster {
namespace router_detail {

constexpr size_t kLanes = 4;  // 4 x 6 connections per worker

inline double now_s() { return std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count(); }

inline bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// A load refused because this worker cannot see or read the bucket (its --bucket is elsewhere or
// missing, or the files are not readable to it), not because the adapter is bad.
inline bool is_bucket_fault(const std::string& why) {
  return contains(why, "outside this worker's bucket") || contains(why, "without --bucket") ||
         contains(why, "cannot read");
}

}  // namespace router_detail

struct Router::Worker {
  int id = 0;
  std::string url;
  std::unique_ptr<WorkerClient> client;          // control calls (lane 0)
  std::vector<std::unique_ptr<WorkerClient>> lanes;  // completions, round robin
  size_t next_lane = 0;
  enum State { Joining, Up, Out } state = Joining;
  bool removed = false;      // dropped by remove_worker(): never probed again
  bool probing = false;
  bool distrusted = false;   // answered with the wrong weights: reload every adapter on rejoin
  uint64_t epoch = 0;        // bumped each time the worker is taken out (stale callbacks ignore themselves)
  int64_t inflight = 0, completed = 0;
  bool draining = false, paused = false;        // operator commands: no new requests
  int64_t dispatched = 0, affinity_hits = 0, tokens = 0;
  double service_s = 0;  // seconds per request: EWMA of answer time / requests in flight at dispatch
  std::string adapter;                          // the newest live one it holds (view, under mu_)
  double next_probe = 0, backoff = 0;
  std::string last_error;
  std::map<std::string, std::string> loaded;  // adapter name -> path it was loaded from
  int strikes = 0;            // times quarantined
  bool quarantined = false;   // out for garbage or wrong weights (its _cleared event on rejoin)
  bool bucket_fault = false;  // could not read the bucket (its _cleared event on rejoin)
};

// One complete() call: its requests and their state.
struct Router::Batch {
  struct Job {
    CompletionRequest req;
    CompletionOutcome out;
    bool done = false;
    double deadline = 0;  // streamed jobs: given up at this time (now_s clock)
    int worker = -1;
    uint64_t epoch = 0;  // the worker's incarnation it was sent to
    double sent_at = 0;         // now_s() at dispatch
    int64_t load_at_send = 1;   // the worker's requests in flight then, this one included
    QNetworkReply* reply = nullptr;
  };
  std::map<size_t, Job> jobs;   // by id; a streamed job is erased once poll() returned it
  std::deque<size_t> pending;
  size_t remaining = 0;
  bool closed = false;
  QEventLoop* loop = nullptr;
  bool streaming = false;       // submit()/poll(): finished jobs are collected, not awaited all
  std::vector<size_t> finished;
  size_t next_id = 0;
};

}  // namespace grpo::cluster
