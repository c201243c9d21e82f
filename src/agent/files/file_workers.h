// FileWorkers: the threads that do the agent's blocking file work (a recursive list or remove
// can take seconds under TCG; the event loop must not wait for it), each job under the
// requesting user's filesystem credentials (files/credentials.h), its result handed back to the
// loop through an eventfd.
//
// Jobs submitted on one Strand run one at a time, in order (a write stream's chunks, then its
// commit or its cleanup); jobs of different strands run in parallel on kThreads threads. The
// threads start with the first job (a box that never touches files pays nothing), block every
// signal (the loop's signalfd takes them) and have their own umask of 0, so modes are exact.
//
// stop() (and destruction, both on the loop thread) lets the threads finish every queued job —
// cleanup jobs must run — while stopping() tells long jobs to give up early; completions not
// yet delivered are dropped without running. A job submitted after stop(), or when no thread
// can be started, is not run: its completion gets the error, on the loop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "agent/event_loop.h"
#include "agent/files/credentials.h"
#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::agent {

class FileWorkers {
 public:
  static constexpr size_t kThreads = 2;

  class Strand;

  explicit FileWorkers(EventLoop& loop);
  ~FileWorkers();
  FileWorkers(const FileWorkers&) = delete;
  FileWorkers& operator=(const FileWorkers&) = delete;

  std::shared_ptr<Strand> makeStrand();

  // Finishes the queued jobs and ends the threads (power-off: temporary files are removed
  // before the disk is synced). Idempotent.
  void stop();

  // Runs work() on a worker thread as `who`, then done(result) on the loop. If the thread cannot
  // take `who`'s credentials, work does not run and done gets the error.
  template <class T>
  void submit(const std::shared_ptr<Strand>& strand, FsCredentials who,
              std::function<Result<T>()> work, std::function<void(Result<T>)> done) {
    enqueue(strand, Job{std::move(who),
                        [work = std::move(work),
                         done = std::move(done)](const Result<>& entered) -> std::function<void()> {
                          auto result = std::make_shared<Result<T>>(
                              entered ? work() : Result<T>(tl::unexpected(entered.error())));
                          return [done, result] { done(std::move(*result)); };
                        }});
  }
  template <class T>
  void submit(FsCredentials who, std::function<Result<T>()> work,
              std::function<void(Result<T>)> done) {
    submit<T>(makeStrand(), std::move(who), std::move(work), std::move(done));
  }

  // True once the agent is shutting down: long jobs return early.
  bool stopping() const { return stopping_.load(std::memory_order_relaxed); }
  const std::atomic<bool>& stopFlag() const { return stopping_; }

 private:
  struct Job {
    FsCredentials who;
    // Runs on the worker (with the result of taking `who`'s credentials); returns what runs
    // on the loop afterwards.
    std::function<std::function<void()>(const Result<>&)> run;
  };

  void enqueue(const std::shared_ptr<Strand>& strand, Job job);
  Result<> startThreads();
  void workerMain();
  void deliver();

  EventLoop& loop_;
  UniqueFd wake_;  // eventfd: completions are waiting
  bool watching_ = false;

  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::deque<std::shared_ptr<Strand>> ready_;  // strands with a job to run, none running
  std::deque<std::function<void()>> completions_;
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;  // loop-side: stop() ran
  std::vector<std::thread> threads_;
};

class FileWorkers::Strand {
 private:
  friend class FileWorkers;
  std::deque<Job> jobs;    // guarded by FileWorkers::mutex_
  bool scheduled = false;  // in ready_ or running
};

}  // namespace hutch::agent
