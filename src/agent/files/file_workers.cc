#include "agent/files/file_workers.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

#include "agent/log.h"

namespace hutch::agent {

FileWorkers::FileWorkers(EventLoop& loop) : loop_(loop) {}

FileWorkers::~FileWorkers() {
  stop();
}

void FileWorkers::stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
  if (watching_) loop_.remove(wake_.get());
  watching_ = false;
  completions_.clear();  // on the loop thread: their captures are the loop's
}

std::shared_ptr<FileWorkers::Strand> FileWorkers::makeStrand() {
  return std::make_shared<Strand>();
}

void FileWorkers::enqueue(const std::shared_ptr<Strand>& strand, Job job) {
  Result<> running = stopped_ ? fail(Errc::kCancelled, "The agent is shutting down") : ok();
  if (running && threads_.empty()) running = startThreads();
  if (!running) {
    // Not run; the completion still comes on the loop, later, as it would from a worker.
    auto completion = job.run(running);
    loop_.post(std::move(completion));
    return;
  }
  {
    std::lock_guard lock(mutex_);
    strand->jobs.push_back(std::move(job));
    if (strand->scheduled) return;  // its worker takes the next job when done with this one
    strand->scheduled = true;
    ready_.push_back(strand);
  }
  work_ready_.notify_one();
}

Result<> FileWorkers::startThreads() {
  if (!wake_) {
    wake_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_) return fail(Error(Errc::kInternal, "Cannot start the file workers", errno));
  }
  if (!watching_) {
    HUTCH_TRY_VOID(loop_.add(wake_.get(), EPOLLIN, [this](uint32_t) { deliver(); }));
    watching_ = true;
  }
  // The threads inherit a mask that blocks everything: a process-directed signal must reach
  // the loop's signalfd, never a worker (where SIGTERM's default action would end the agent).
  sigset_t all;
  sigset_t old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    for (size_t i = 0; i < kThreads; ++i) threads_.emplace_back([this] { workerMain(); });
  } catch (const std::system_error& error) {
    // Fewer threads than asked is fine; none is an error for the job at hand.
    logWarning(std::string("Cannot start a file worker: ") + error.what());
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (threads_.empty()) return fail(Errc::kInternal, "Cannot start the file workers");
  return ok();
}

void FileWorkers::workerMain() {
  // A umask of its own (not the process's): modes asked for are the modes made.
  if (::unshare(CLONE_FS) == 0) {
    ::umask(0);
  } else {
    logWarning("A file worker cannot have its own umask; new files get the agent's umask");
  }
  while (true) {
    std::shared_ptr<Strand> strand;
    Job job;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [this] { return !ready_.empty() || stopping_; });
      if (ready_.empty()) return;  // stopping, and nothing left to run
      strand = std::move(ready_.front());
      ready_.pop_front();
      job = std::move(strand->jobs.front());
      strand->jobs.pop_front();
    }
    std::function<void()> completion;
    {
      ScopedFsCredentials as(job.who);
      completion = job.run(as.entered());
    }
    job = Job{};  // released here, not on the loop
    bool more = false;
    {
      std::lock_guard lock(mutex_);
      completions_.push_back(std::move(completion));
      if (strand->jobs.empty()) {
        strand->scheduled = false;
      } else {
        ready_.push_back(strand);
        more = true;
      }
    }
    if (more) work_ready_.notify_one();
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_.get(), &one, sizeof one);
  }
}

void FileWorkers::deliver() {
  uint64_t count = 0;
  [[maybe_unused]] const ssize_t n = ::read(wake_.get(), &count, sizeof count);
  std::deque<std::function<void()>> ready;
  {
    std::lock_guard lock(mutex_);
    ready.swap(completions_);
  }
  for (auto& completion : ready) completion();
}

}  // namespace hutch::agent
