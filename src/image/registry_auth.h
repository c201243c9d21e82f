// Registry credentials hutchd keeps on the host (`hutch registry login HOST`): a Docker-style
// config.json ({"auths": {"HOST": {"auth": base64(user:password)}}}) that skopeo reads with
// --authfile. It is root's, mode 0600, in hutchd's state directory; no box ever sees it (a box's
// own `docker login` is its own business). Passwords are never listed back.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::image {

struct RegistryLogin {
  std::string registry;  // host[:port] as given to login
  std::string username;
  bool operator==(const RegistryLogin&) const = default;
};

// "registry.example:5000", "127.0.0.1:5000", "[::1]:5000", "docker.io" (also for
// index.docker.io and registry-1.docker.io): lowercase, a host name or address and an optional
// port. kInvalidArgument otherwise, saying what is expected.
Result<std::string> normalizeRegistry(std::string_view host);

// The logins in `authfile` (none when it does not exist); kFailedPrecondition when it is not
// a valid auth file.
Result<std::vector<RegistryLogin>> listLogins(const std::filesystem::path& authfile);
// Adds or replaces the login of `registry` (written atomically, 0600).
Result<> saveLogin(const std::filesystem::path& authfile, const std::string& registry,
                   std::string_view username, std::string_view password);
// Removes it; kNotFound when there is none.
Result<> removeLogin(const std::filesystem::path& authfile, const std::string& registry);

}  // namespace hutch::image
