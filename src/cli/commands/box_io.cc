// hutch port | exec -d | procs | kill | services | logs --exec/--service | image load:
// what runs and listens inside a box.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "api/json_model.h"
#include "cli/commands/commands.h"
#include "cli/exec_io.h"
#include "cli/oci_archive.h"
#include "proto/services.h"

namespace hutch::cli {

using boost::beast::http::verb;

namespace {

std::string boxPath(const std::string& box) {
  return "/v1/boxes/" + box;
}

std::vector<std::string> portRow(const box::PortStatus& s) {
  std::string state = s.listening ? "listening" : (s.error.empty() ? "box not running" : s.error);
  return {box::hostEndpoint(s.forward), std::to_string(s.forward.box_port), state,
          std::to_string(s.connections)};
}

// ns since the epoch -> "3 minutes ago"
std::string ageOfNs(int64_t ns) {
  return humanAge(ns / 1000000000);
}

Result<int> parseSignal(const std::string& text) {
  static constexpr std::array<std::pair<const char*, int>, 12> kNames{{{"HUP", SIGHUP},
                                                                       {"INT", SIGINT},
                                                                       {"QUIT", SIGQUIT},
                                                                       {"KILL", SIGKILL},
                                                                       {"USR1", SIGUSR1},
                                                                       {"USR2", SIGUSR2},
                                                                       {"TERM", SIGTERM},
                                                                       {"CONT", SIGCONT},
                                                                       {"STOP", SIGSTOP},
                                                                       {"TSTP", SIGTSTP},
                                                                       {"WINCH", SIGWINCH},
                                                                       {"ALRM", SIGALRM}}};
  std::string name = text;
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (name.starts_with("SIG")) name = name.substr(3);
  for (const auto& [n, value] : kNames) {
    if (name == n) return value;
  }
  if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos &&
      name.size() <= 2) {
    int value = std::stoi(name);
    if (value >= 1 && value <= 64) return value;
  }
  return fail(Errc::kInvalidArgument,
              fmt::format("Unknown signal '{}': use a number (1-64) or a name such as TERM, KILL, "
                          "INT, HUP",
                          text));
}

std::string exitText(const nlohmann::json& p) {
  if (p.value("running", false)) return "running";
  if (p.contains("code")) return fmt::format("exited ({})", p.value("code", 0));
  if (p.contains("signal")) return fmt::format("killed ({})", strsignal(p.value("signal", 0)));
  return "ended";
}

std::string joinArgv(const nlohmann::json& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += a.get<std::string>();
  }
  return out;
}

}  // namespace

// ---- ports ----

Result<> publishPorts(const ApiClient& client, const std::string& box,
                      const std::vector<std::string>& specs) {
  for (const std::string& spec : specs) {
    HUTCH_TRY(box::PortForward forward, box::parsePortSpec(spec));
    HUTCH_TRY_VOID(client.call(verb::post, boxPath(box) + "/ports", api::toJson(forward)));
  }
  return ok();
}

int cmdPortAdd(const ApiClient& client, const Output& out, const std::string& box,
               const std::string& spec) {
  auto forward = box::parsePortSpec(spec);
  if (!forward) return reportError(out, forward.error());
  auto added = client.call(verb::post, boxPath(box) + "/ports", api::toJson(*forward));
  if (!added) return reportError(out, added.error());
  if (out.json) {
    printJson(*added);
    return 0;
  }
  auto status = api::portStatusFromJson(*added);
  if (!status) return reportError(out, status.error());
  fmt::print("{} -> {}:{}\n", box::hostEndpoint(status->forward), box, status->forward.box_port);
  return 0;
}

int cmdPortList(const ApiClient& client, const Output& out, const std::string& box) {
  auto listed = client.call(verb::get, boxPath(box) + "/ports");
  if (!listed) return reportError(out, listed.error());
  if (out.json) {
    printJson((*listed)["ports"]);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& j : (*listed)["ports"]) {
    auto status = api::portStatusFromJson(j);
    if (!status) return reportError(out, status.error());
    rows.push_back(portRow(*status));
  }
  printTable({"HOST", "BOX PORT", "STATE", "CONNECTIONS"}, rows);
  return 0;
}

int cmdPortRemove(const ApiClient& client, const Output& out, const std::string& box,
                  const std::vector<std::string>& ports, const std::string& address) {
  int code = 0;
  for (const std::string& port : ports) {
    std::string target = boxPath(box) + "/ports/" + port;
    if (!address.empty()) target += "?address=" + address;
    auto removed = client.call(verb::delete_, target);
    if (!removed) {
      code = reportError(out, removed.error());
      continue;
    }
    if (!out.json) fmt::print("{}\n", port);
  }
  return code;
}

// ---- detached processes ----

int cmdExecDetached(const ApiClient& client, const Output& out, const std::string& box,
                    const ExecOptions& options) {
  if (options.interactive || options.tty) {
    return reportError(out, Error(Errc::kInvalidArgument,
                                  "-d runs the command in the background with its output in a "
                                  "log: it cannot take -i or -t"));
  }
  proto::ExecRequest request;
  request.argv = options.argv;
  request.env = options.env;
  request.cwd = options.cwd;
  request.user = options.user;
  auto started = client.call(verb::post, boxPath(box) + "/processes",
                             nlohmann::json::parse(proto::encodeMessage(request)));
  if (!started) return reportError(out, started.error());
  if (out.json) {
    printJson(*started);
  } else {
    fmt::print("{}\n", started->value("id", ""));
  }
  return 0;
}

int cmdProcesses(const ApiClient& client, const Output& out, const std::string& box) {
  auto listed = client.call(verb::get, boxPath(box) + "/processes");
  if (!listed) return reportError(out, listed.error());
  if (out.json) {
    printJson((*listed)["processes"]);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : (*listed)["processes"]) {
    rows.push_back({p.value("id", ""), std::to_string(p.value("pid", 0)), p.value("user", ""),
                    exitText(p), ageOfNs(p.value("started_ns", int64_t{0})),
                    joinArgv(p.value("argv", nlohmann::json::array()))});
  }
  printTable({"ID", "PID", "USER", "STATUS", "STARTED", "COMMAND"}, rows);
  return 0;
}

int cmdKill(const ApiClient& client, const Output& out, const std::string& box,
            const std::vector<std::string>& ids, const std::string& signal) {
  auto signo = parseSignal(signal);
  if (!signo) return reportError(out, signo.error());
  int code = 0;
  for (const std::string& id : ids) {
    auto sent = client.call(verb::post, boxPath(box) + "/processes/" + id + "/signal",
                            nlohmann::json{{"signal", *signo}});
    if (!sent) {
      code = reportError(out, sent.error());
      continue;
    }
    if (!out.json) fmt::print("{}\n", id);
  }
  return code;
}

int cmdServices(const ApiClient& client, const Output& out, const std::string& box) {
  auto listed = client.call(verb::get, boxPath(box) + "/services");
  if (!listed) return reportError(out, listed.error());
  if (out.json) {
    printJson((*listed)["services"]);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : (*listed)["services"]) {
    std::string pid = s.value("pid", 0) > 0 ? std::to_string(s.value("pid", 0)) : "-";
    std::string since =
        s.value("started_ns", int64_t{0}) > 0 ? ageOfNs(s.value("started_ns", int64_t{0})) : "-";
    rows.push_back({s.value("name", ""), s.value("state", ""), pid,
                    std::to_string(s.value("restarts", 0)), since, s.value("error", "")});
  }
  printTable({"NAME", "STATE", "PID", "RESTARTS", "STARTED", "ERROR"}, rows);
  return 0;
}

// ---- logs of what runs in the box ----

int cmdBoxLogs(const ApiClient& client, const Output& out, const std::string& box,
               const BoxLogOptions& options) {
  std::string path;
  if (!options.exec_id.empty()) {
    auto listed = client.call(verb::get, boxPath(box) + "/processes");
    if (!listed) return reportError(out, listed.error());
    for (const auto& p : (*listed)["processes"]) {
      if (p.value("id", "") == options.exec_id) path = p.value("log", "");
    }
    if (path.empty()) {
      return reportError(
          out, Error(Errc::kNotFound, fmt::format("Box {} has no detached process '{}' (see 'hutch "
                                                  "procs {}')",
                                                  box, options.exec_id, box)));
    }
  } else {
    if (!proto::isValidServiceName(options.service)) {
      return reportError(out, Error(Errc::kInvalidArgument,
                                    fmt::format("'{}' is not a service name", options.service)));
    }
    auto listed = client.call(verb::get, boxPath(box) + "/services");
    if (!listed) return reportError(out, listed.error());
    std::vector<std::string> names;
    for (const auto& s : (*listed)["services"]) {
      names.push_back(s.value("name", ""));
      if (s.value("name", "") == options.service) path = s.value("log", "");
    }
    if (path.empty()) {
      return reportError(
          out,
          Error(Errc::kNotFound,
                fmt::format("Box {} has no service '{}' ({})", box, options.service,
                            names.empty() ? std::string("its image declares none")
                                          : fmt::format("services: {}", fmt::join(names, ", ")))));
    }
  }
  // The log is read in the box by tail, as root (the logs are root's); -f follows it until ^C.
  ExecOptions exec;
  exec.user = "root";
  exec.argv = {"tail", "-c", "+1"};
  if (options.follow) exec.argv.emplace_back("-f");
  exec.argv.push_back(path);
  auto code = runExec(client, box, exec);
  if (!code) return reportError(out, code.error());
  return options.follow && *code == 128 + SIGINT ? 0 : *code;
}

// ---- images ----

namespace {

// A seekable descriptor of the archive: the file itself, or stdin (copied to an unlinked temp
// file first when it is a pipe, as the archive is read twice).
Result<UniqueFd> openImageArchive(const std::string& file) {
  if (file != "-") {
    UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
      return fail(errno == ENOENT ? Errc::kNotFound : Errc::kInvalidArgument,
                  fmt::format("Cannot open {}: {}", file, strerror(errno)));
    }
    if (::lseek(fd.get(), 0, SEEK_SET) == 0) return fd;
    // A FIFO or a device: buffered like stdin below.
    if (::dup2(fd.get(), STDIN_FILENO) < 0) return fail(sysError("Cannot read " + file, errno));
  } else if (::isatty(STDIN_FILENO) != 0) {
    return fail(Errc::kInvalidArgument,
                "'-' reads the archive from stdin, which is a terminal: pipe it in (hutch image "
                "load BOX - < image.tar) or give its path");
  }
  if (::lseek(STDIN_FILENO, 0, SEEK_CUR) >= 0) {
    UniqueFd fd(::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0));
    if (!fd) return fail(sysError("Cannot read stdin", errno));
    return fd;
  }
  const char* env_tmpdir = std::getenv("TMPDIR");
  std::string tmpdir = env_tmpdir != nullptr && *env_tmpdir != '\0' ? env_tmpdir : "/tmp";
  std::string path = tmpdir + "/hutch-image-XXXXXX";
  UniqueFd fd(::mkostemp(path.data(), O_CLOEXEC));
  if (!fd) {
    return fail(sysError(fmt::format("Cannot create a temp file for the archive from stdin in {} "
                                     "(set TMPDIR to a writable directory)",
                                     tmpdir),
                         errno));
  }
  ::unlink(path.c_str());
  std::vector<char> buf(256 * 1024);
  while (true) {
    ssize_t n = ::read(STDIN_FILENO, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(sysError("Cannot read the archive from stdin", errno));
    if (n == 0) break;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(fd.get(), buf.data() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        return fail(sysError(fmt::format("Cannot keep the archive from stdin in {} (set TMPDIR "
                                         "to a directory with room, or give the file's path)",
                                         tmpdir),
                             errno));
      }
      done += w;
    }
  }
  return fd;
}

}  // namespace

int cmdImageLoad(const ApiClient& client, const Output& out, const std::string& box,
                 const std::string& file) {
  auto fd = openImageArchive(file);
  if (!fd) return reportError(out, fd.error());
  // Docker 20.10 loads `docker save` archives (plain or compressed) as they are; an OCI layout
  // is checked here in full and sent as a docker-save archive made on the fly, so nothing reaches
  // the box when it cannot be loaded.
  auto archive = inspectImageArchive(fd->get(), file == "-" ? "stdin" : file);
  if (!archive) return reportError(out, archive.error());

  std::vector<std::string> argv{"docker", "load"};
  Result<int> code = 0;
  if (archive->format == ImageArchive::Format::kDockerSave) {
    if (::lseek(fd->get(), 0, SEEK_SET) < 0)
      return reportError(out, sysError("Cannot read " + file, errno));
    code = runExecFds(client, box, argv, "root", {fd->get(), STDOUT_FILENO, STDERR_FILENO});
  } else {
    std::signal(SIGPIPE, SIG_IGN);  // the producer sees EPIPE when the box's side goes away
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      return reportError(out, sysError("Cannot create a pipe", errno));
    UniqueFd rd(fds[0]);
    UniqueFd wr(fds[1]);
    Result<> produced = ok();
    std::thread producer([&, w = std::move(wr)]() mutable {
      produced = writeDockerArchive(fd->get(), archive->images, w.get());
      w.reset();  // EOF for docker load
    });
    code = runExecFds(client, box, argv, "root", {rd.get(), STDOUT_FILENO, STDERR_FILENO});
    rd.reset();
    producer.join();
    // A local failure is the cause unless it only saw the box's side go away.
    if (!produced && produced.error().sysErrno() != EPIPE)
      return reportError(out, produced.error());
  }
  if (!code) return reportError(out, code.error());
  if (*code == 127) {
    return reportError(out, Error(Errc::kFailedPrecondition,
                                  fmt::format("Box {} has no docker: make it from the docker "
                                              "template (hutch run --template docker)",
                                              box)));
  }
  return *code;
}

}  // namespace hutch::cli
