// hostile-agent: a PID 1 for a box that speaks the agent protocol wrongly on purpose, for
// HostileGuestTest (hostile_test.cc). A box's root installs it as its init (/etc/hutch/init),
// as a real attacker with root in the box could; hutchd must survive whatever it does.
//
// It finds the agent port as hutch-agent does, answers kHello (unless the box's hostname, from
// hutch.hostname= on the kernel command line, contains "nohello") and serves each kExec by its
// argv[0] with one misbehaviour:
//
//   echo WORDS...  a correct answer: kStarted, the words on stdout, kExit 0 (proves the channel
//                  still works after the misbehaviours before it)
//   ghosts         frames for streams that were never opened (output, kExit, kResult, kStarted,
//                  kError, kWindow, kConnected, kFileEntries), then on the real stream kStarted,
//                  "ghosts ignored\n", a fake kExit 42, then a second kExit and output after it
//   fake-signal    kExit {"signal":9} for a process that never existed
//   bad-exit       kExit whose JSON is of the wrong type
//   bad-started    kStarted that is not JSON
//   endless        kStarted, then "tick N\n" every 200 ms forever; ignores kSignal
//   silent         kStarted, then nothing ever; ignores kSignal
//   flood [SECS]   kStarted, then 64 KiB kStdout frames as fast as the port takes them for SECS
//                  seconds (default 20), ignoring the window, mixed with output for unknown
//                  streams; reads nothing meanwhile
//   deaf           kStarted, kWindow credits of 4 GiB each, then never reads the port again;
//                  after 5 s sends 1 MiB kPing frames (up to 256 MiB) whose kPongs can never be
//                  read
//   truncate       half a frame (before any kStarted), then silence (it still reads, and powers off
//   on kPoweroff) oversized      a frame header claiming a 4 GiB payload stream0        kStdout on
//   stream 0
// In a "nohello" box it never answers kHello and sends garbage instead: random bytes, kHelloAck
// frames with broken JSON, truncated kHelloAck headers and kError frames that are not
// "unsupported".
//
// It never exits (PID 1 exiting panics the kernel): when it has nothing left to do it sleeps.
// Statically linked: it runs before anything else of the box's userland.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/reboot.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "proto/frame.h"
#include "proto/messages.h"

namespace {

using hutch::proto::Frame;
using hutch::proto::FrameType;
namespace proto = hutch::proto;

void say(const std::string& line) {
  std::fprintf(stderr, "hostile-agent: %s\n", line.c_str());
  std::fflush(stderr);
}

double now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

void sleepMs(int ms) {
  ::usleep(static_cast<useconds_t>(ms) * 1000);
}

[[noreturn]] void sleepForever(const std::string& why) {
  say("sleeping forever: " + why);
  while (true) ::pause();
}

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// hutch.hostname=NAME from the kernel command line (the box's name).
std::string hostname() {
  std::istringstream words(readText("/proc/cmdline"));
  std::string word;
  while (words >> word) {
    if (word.starts_with("hutch.hostname=")) return word.substr(15);
  }
  return {};
}

// /dev/vportNpM whose /sys/class/virtio-ports entry is named hutch.agent (as hutch-agent finds it).
std::optional<std::string> findPort() {
  DIR* dir = ::opendir("/sys/class/virtio-ports");
  if (dir == nullptr) return std::nullopt;
  std::optional<std::string> found;
  while (dirent* entry = ::readdir(dir)) {
    const std::string port = entry->d_name;
    if (port == "." || port == "..") continue;
    std::string name = readText("/sys/class/virtio-ports/" + port + "/name");
    while (!name.empty() && name.back() == '\n') name.pop_back();
    if (name == "hutch.agent") {
      found = "/dev/" + port;
      break;
    }
  }
  ::closedir(dir);
  return found;
}

std::string header(uint32_t length, uint8_t type, uint32_t stream) {
  std::string h(12, '\0');
  for (int i = 0; i < 4; ++i) {
    h[i] = static_cast<char>((length >> (8 * i)) & 0xff);
    h[8 + i] = static_cast<char>((stream >> (8 * i)) & 0xff);
  }
  h[4] = static_cast<char>(type);
  return h;
}

class Hostile {
 public:
  Hostile(int fd, bool nohello) : fd_(fd), nohello_(nohello) {}

  [[noreturn]] void serve() {
    double next_tick = now();
    std::vector<char> buffer(64 * 1024);
    while (true) {
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, 100);
      if (ready > 0 && (p.revents & POLLIN) != 0) {
        const ssize_t n = ::read(fd_, buffer.data(), buffer.size());
        if (n > 0) {
          decoder_.feed(std::span<const char>(buffer.data(), static_cast<size_t>(n)));
          drain();
        } else if (n == 0) {
          sleepMs(50);  // no host connected
        }
      } else if (ready > 0) {
        sleepMs(50);  // POLLHUP: no host connected
      }
      if (now() >= next_tick) {
        next_tick = now() + 0.2;
        tick();
      }
    }
  }

 private:
  // Every write goes out whole (the fd blocks); a failed write is logged once and the rest of
  // this write dropped.
  void write(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (!write_failed_) say(std::string("write failed: ") + std::strerror(errno));
        write_failed_ = true;
        sleepMs(50);
        return;
      }
      done += static_cast<size_t>(n);
    }
  }

  void send(FrameType type, uint32_t stream, std::string_view payload) {
    if (silent_) return;
    std::string out;
    proto::encodeFrame(type, stream, payload, out);
    write(out);
  }

  void drain() {
    while (true) {
      auto next = decoder_.next();
      if (!next) {
        say("the host's bytes did not decode (" + next.error().message() + "); new decoder");
        decoder_ = proto::FrameDecoder();
        return;
      }
      if (!next->has_value()) return;
      handle(**next);
    }
  }

  void handle(const Frame& frame) {
    switch (frame.type) {
      case FrameType::kHello: {
        if (nohello_) return;
        proto::HelloAck ack;
        ack.agent = "6.6.6-hostile";
        ack.capabilities = {"exec", "signal", "window", "poweroff", "tty"};
        return send(FrameType::kHelloAck, 0, proto::encodeMessage(ack));
      }
      case FrameType::kPing: return send(FrameType::kPong, 0, frame.payload);
      case FrameType::kPoweroff:
        say("kPoweroff: powering off");
        ::sync();
        ::reboot(RB_POWER_OFF);
        sleepForever("reboot() returned");
      case FrameType::kExec: return exec(frame);
      default: return;  // kSignal, kWindow, kStdin...: ignored, the point of a hostile guest
    }
  }

  void started(uint32_t stream) { send(FrameType::kStarted, stream, R"({"pid":1})"); }
  void exited(uint32_t stream, int code) {
    send(FrameType::kExit, stream, proto::encodeMessage(proto::ExitStatus::exited(code)));
  }

  void exec(const Frame& frame) {
    auto request = proto::decodeMessage<proto::ExecRequest>(frame.payload);
    if (!request || request->argv.empty()) {
      return send(FrameType::kError, frame.stream, R"({"code":"protocol","message":"hostile"})");
    }
    const uint32_t s = frame.stream;
    const std::string& command = request->argv[0];
    say("exec " + command + " on stream " + std::to_string(s));
    if (command == "echo") {
      std::string words;
      for (size_t i = 1; i < request->argv.size(); ++i) {
        words += (i > 1 ? " " : "") + request->argv[i];
      }
      started(s);
      send(FrameType::kStdout, s, words + "\n");
      exited(s, 0);
    } else if (command == "ghosts") {
      // Streams that never existed: ids the host has not reached yet and far-off ones.
      for (uint32_t ghost : {s + 1, s + 1000, 4242u, 31337u, 0x7fffffffu, 0xffffffffu}) {
        send(FrameType::kStdout, ghost, "boo\n");
        send(FrameType::kStderr, ghost, "boo\n");
        send(FrameType::kStarted, ghost, R"({"pid":666})");
        send(FrameType::kWindow, ghost, proto::encodeWindow(0xffffffffu));
        send(FrameType::kResult, ghost, "{}");
        send(FrameType::kConnected, ghost, "{}");
        send(FrameType::kFileEntries, ghost, R"({"entries":[]})");
        send(FrameType::kError, ghost, R"({"code":"internal","message":"ghost"})");
        exited(ghost, 13);
      }
      started(s);
      send(FrameType::kStdout, s, "ghosts ignored\n");
      exited(s, 42);
      // After the last frame of the stream: must be dropped.
      exited(s, 0);
      send(FrameType::kStdout, s, "after the exit\n");
    } else if (command == "fake-signal") {
      started(s);
      send(FrameType::kExit, s, R"({"signal":9})");
    } else if (command == "bad-exit") {
      started(s);
      send(FrameType::kExit, s, R"({"code":"forty-two"})");
    } else if (command == "bad-started") {
      send(FrameType::kStarted, s, "this is not JSON");
    } else if (command == "endless") {
      started(s);
      endless_.push_back(s);
    } else if (command == "silent") {
      started(s);
    } else if (command == "flood") {
      int seconds = 20;
      if (request->argv.size() > 1) {
        const std::string& arg = request->argv[1];
        std::from_chars(arg.data(), arg.data() + arg.size(), seconds);
      }
      flood(s, seconds);
    } else if (command == "deaf") {
      deaf(s);
    } else if (command == "truncate") {
      write(header(1000, static_cast<uint8_t>(FrameType::kStdout), s) + "only ten b");
      say("sent half a frame; silent from now on");
      silent_ = true;
    } else if (command == "oversized") {
      started(s);
      write(header(0xfffffff0u, static_cast<uint8_t>(FrameType::kStdout), s) + "xxxx");
      say("sent a 4 GiB frame header");
    } else if (command == "stream0") {
      send(FrameType::kStdout, 0, "on the connection's stream\n");
    } else {
      send(FrameType::kError, s, R"({"code":"not_found","message":"hostile: no such trick"})");
    }
  }

  // Output for stream s regardless of the window, and for streams that do not exist.
  void flood(uint32_t s, int seconds) {
    started(s);
    const std::string chunk(64 * 1024, 'F');
    std::string frames;
    proto::encodeFrame(FrameType::kStdout, s, chunk, frames);
    for (uint32_t ghost : {s + 7, 99999u}) {
      proto::encodeFrame(FrameType::kStdout, ghost, chunk, frames);
      proto::encodeFrame(FrameType::kWindow, ghost, proto::encodeWindow(1u << 30), frames);
    }
    const double until = now() + seconds;
    uint64_t bytes = 0;
    while (now() < until && !write_failed_) {
      write(frames);
      bytes += frames.size();
    }
    say("flooded " + std::to_string(bytes >> 20) + " MiB in " + std::to_string(seconds) + " s");
    exited(s, 0);
  }

  // Grants the host 4 GiB of stdin window four times over and stops reading the port, so that
  // whatever the host sends piles up on its side; then pings it with 1 MiB payloads, whose
  // answers cannot be delivered either.
  [[noreturn]] void deaf(uint32_t s) {
    started(s);
    for (int i = 0; i < 4; ++i) send(FrameType::kWindow, s, proto::encodeWindow(0xffffffffu));
    say("deaf from now on");
    sleepMs(5000);
    const std::string payload(1u << 20, 'P');
    std::string ping;
    proto::encodeFrame(FrameType::kPing, 0, payload, ping);
    int sent = 0;
    for (; sent < 256 && !write_failed_; ++sent) write(ping);
    sleepForever("deaf, after " + std::to_string(sent) + " pings of 1 MiB");
  }

  void tick() {
    ++ticks_;
    for (uint32_t s : endless_) {
      send(FrameType::kStdout, s, "tick " + std::to_string(ticks_) + "\n");
    }
    if (!nohello_) return;
    // Garbage before any handshake.
    std::string junk(4096, '\0');
    for (char& c : junk) c = static_cast<char>(random_());
    junk += header(20, static_cast<uint8_t>(FrameType::kHelloAck), 0) + "{\"version\":1,\"agen";
    junk += "t\":17}";
    junk += header(9, static_cast<uint8_t>(FrameType::kHelloAck), 0) + "not json!";
    junk += header(40, static_cast<uint8_t>(FrameType::kError), 0) +
            R"({"code":"internal","message":"nope!!!"})";
    junk += header(4096, static_cast<uint8_t>(FrameType::kHelloAck), 0) + "{\"version\":1";
    write(junk);
  }

  int fd_;
  bool nohello_;
  bool silent_ = false;
  bool write_failed_ = false;
  proto::FrameDecoder decoder_;
  std::vector<uint32_t> endless_;
  uint64_t ticks_ = 0;
  std::minstd_rand random_{42};
};

}  // namespace

int main() {
  std::signal(SIGPIPE, SIG_IGN);
  const std::string name = hostname();
  const bool nohello = name.find("nohello") != std::string::npos;
  say("PID " + std::to_string(::getpid()) + " in box " + name +
      (nohello ? ": never answering kHello" : ""));
  while (true) {
    auto device = findPort();
    if (device) {
      const int fd = ::open(device->c_str(), O_RDWR | O_CLOEXEC);
      if (fd >= 0) {
        say("opened " + *device);
        Hostile(fd, nohello).serve();
      }
    }
    sleepMs(100);
  }
}
