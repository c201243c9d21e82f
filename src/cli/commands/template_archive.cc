// hutch template create NAME --from-archive FILE|DIR|- [--image NAME]: an image archive made a
// template by hutchd. The CLI may run on another machine than hutchd, so the archive travels as
// the body of POST /v1/templates/NAME/archive, sent as it is read: a file (a `docker save` tar
// or an OCI archive, plain or compressed) as it is, stdin as it comes, a directory (an OCI image
// layout) as a tar of its contents made on the fly (tar_stream.h). hutchd checks it all (image/
// image_archive.h); the CLI only reads it.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <optional>
#include <thread>

#include "base/unique_fd.h"
#include "cli/commands/commands.h"
#include "cli/output.h"
#include "cli/progress.h"
#include "cli/tar_stream.h"

namespace hutch::cli {

using boost::beast::http::verb;

Result<> sendTemplateArchive(const ApiClient& client, const Output& out, const std::string& name,
                             const TemplateSource& from,
                             const std::function<void(const nlohmann::json&)>& on_line) {
  std::string target = "/v1/templates/" + percentEncode(name) + "/archive";
  std::string query;
  if (!from.archive_image.empty()) query += "&image=" + percentEncode(from.archive_image);
  if (from.systemd) query += "&systemd=true";
  if (!query.empty()) target += "?" + query.substr(1);
  UniqueFd file;
  int body = STDIN_FILENO;
  std::optional<CopyPlan> directory;
  if (from.archive == "-") {
    if (::isatty(STDIN_FILENO) != 0) {
      return fail(Errc::kInvalidArgument,
                  "'-' reads the archive from stdin, which is a terminal: pipe it in (docker save "
                  "IMAGE | hutch template create NAME --from-archive -) or give its path");
    }
  } else {
    struct stat st {};
    if (::stat(from.archive.c_str(), &st) != 0) {
      return fail(errno == ENOENT ? Errc::kNotFound : Errc::kInvalidArgument,
                  fmt::format("Cannot read {}: {}", from.archive, strerror(errno)));
    }
    if (S_ISDIR(st.st_mode)) {
      // An OCI image layout: its contents, named from inside it (oci-layout, index.json, blobs/).
      if (::access((from.archive + "/index.json").c_str(), R_OK) != 0) {
        return fail(Errc::kInvalidArgument,
                    fmt::format("{} is a directory without index.json: give an OCI image layout "
                                "(skopeo copy ... oci:DIR), or a `docker save` archive as a file",
                                from.archive));
      }
      directory = CopyPlan{
          .source_dir = from.archive, .source_name = ".", .target_dir = "", .target_name = "."};
    } else {
      file = UniqueFd(::open(from.archive.c_str(), O_RDONLY | O_CLOEXEC));
      if (!file) return fail(sysError("Cannot open " + from.archive, errno));
      body = file.get();
    }
  }

  // A directory's tar is made by a thread into a pipe that is sent as it fills.
  std::signal(SIGPIPE, SIG_IGN);  // the producer sees EPIPE if the upload stops
  UniqueFd pipe_read;
  std::thread producer;
  Result<> produced = ok();
  if (directory) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return fail(sysError("Cannot create a pipe", errno));
    pipe_read = UniqueFd(fds[0]);
    producer = std::thread([&produced, plan = *directory, w = UniqueFd(fds[1])]() mutable {
      produced = writeTar(plan, w.get(), TarOwner{.uid = 0, .gid = 0}, {});
    });
    body = pipe_read.get();
  }
  Progress sending(!out.json && ::isatty(STDERR_FILENO) != 0 ? stderr : nullptr,
                   "Sending the archive");
  uint64_t counted = 0;
  bool answered = false;
  auto sent = client.uploadLines(
      verb::post, target, "application/x-tar", body,
      [&](const nlohmann::json& line) {
        if (!answered) sending.clear();
        answered = true;
        on_line(line);
      },
      [&](uint64_t bytes) {
        sending.add(bytes - counted);
        counted = bytes;
      });
  if (!answered) sending.clear();
  pipe_read.reset();  // a producer still writing ends (EPIPE)
  if (producer.joinable()) producer.join();
  if (!produced && produced.error().sysErrno() != EPIPE) return produced;
  return sent;
}

}  // namespace hutch::cli
