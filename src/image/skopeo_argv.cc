#include "image/skopeo_argv.h"

#include <string>

namespace hutch::image {

void SkopeoGlobal::appendTo(Argv& argv) const {
  if (!policy.empty()) argv.insert(argv.end(), {"--policy", policy.string()});
  if (!tmpdir.empty()) argv.insert(argv.end(), {"--tmpdir", tmpdir.string()});
  if (command_timeout.count() > 0) {
    argv.insert(argv.end(), {"--command-timeout", std::to_string(command_timeout.count()) + "s"});
  }
}

void RegistryAccess::appendTo(Argv& argv, std::string_view prefix) const {
  const std::string p(prefix);
  if (authfile.empty()) {
    argv.push_back("--" + p + "no-creds");
  } else {
    argv.insert(argv.end(), {"--" + p + "authfile", authfile.string()});
  }
  if (!cert_dir.empty()) argv.insert(argv.end(), {"--" + p + "cert-dir", cert_dir.string()});
  if (insecure) argv.push_back("--" + p + "tls-verify=false");
}

Argv SkopeoInspect::render() const {
  Argv argv{skopeo.string()};
  global.appendTo(argv);
  argv.emplace_back("inspect");
  argv.emplace_back("--raw");
  if (config) argv.emplace_back("--config");
  access.appendTo(argv, "");
  argv.insert(argv.end(), {"--retry-times", std::to_string(retries), image});
  return argv;
}

Argv SkopeoCopy::render() const {
  Argv argv{skopeo.string()};
  global.appendTo(argv);
  argv.emplace_back("copy");
  if (source.starts_with("docker://")) access.appendTo(argv, "src-");
  argv.insert(argv.end(),
              {"--retry-times", std::to_string(retries), "--dest-shared-blob-dir",
               shared_blobs.string(), source, "oci:" + layout.string() + ":" + ref_name});
  return argv;
}

}  // namespace hutch::image
