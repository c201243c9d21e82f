// The host side of `hutch exec -t`: the user's terminal in raw mode (always restored), its
// window size, and the signals the exec loop takes as events instead of dying of them.
#pragma once

#include <signal.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::cli {

struct TerminalSize {
  uint16_t rows = 0;
  uint16_t cols = 0;

  bool operator==(const TerminalSize&) const = default;
};

bool isTerminal(int fd);

// The window size of the terminal on fd (TIOCGWINSZ); nullopt if fd is not a terminal.
std::optional<TerminalSize> terminalSize(int fd);

// Puts the terminal on fd in raw mode (cfmakeraw: no echo, no line editing, no signals from
// keys, no output processing) for the object's lifetime. The saved modes come back on every way
// out: the destructor, exit(), and a signal that would end the process (SIGSEGV, SIGABRT,
// SIGPIPE, ... — each one whose action is the default gets a handler that restores the modes,
// then lets the signal take its default action). Signals the caller watches with SignalWatch
// (SIGINT, SIGTERM, SIGHUP, ...) are not handled here: they end the caller's loop normally.
// One RawMode at a time per process.
class RawMode {
 public:
  static Result<std::unique_ptr<RawMode>> enter(int fd);

  ~RawMode();
  RawMode(const RawMode&) = delete;
  RawMode& operator=(const RawMode&) = delete;

  // Restores the saved modes now (idempotent).
  void restore();

 private:
  RawMode() = default;

  bool active_ = true;
  std::vector<std::pair<int, struct sigaction>> previous_handlers_;
};

// Signals delivered through a descriptor (signalfd) so that a poll() loop handles them in
// order with its other events. The signals are blocked from create() until destruction; the
// destructor discards those still pending, then restores the previous mask.
class SignalWatch {
 public:
  static Result<std::unique_ptr<SignalWatch>> create(std::initializer_list<int> signals);

  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  int fd() const { return fd_.get(); }
  // The next pending signal number, or 0 if none is pending.
  int take();

 private:
  SignalWatch(UniqueFd fd, const sigset_t& previous) : fd_(std::move(fd)), previous_(previous) {}

  UniqueFd fd_;
  sigset_t previous_;
};

}  // namespace hutch::cli
