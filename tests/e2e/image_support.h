// What the tests of templates from hostile registries and from archives share
// (image_hostile_test.cc, image_archive_test.cc): the test images, the checks that a failed
// create left nothing, and a CLI run with a hard bound that only proves it ended.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness.h"

namespace hutch::e2e {

// The CLI's exit codes of the errors these tests expect (api/error_mapping.cc).
namespace exit_code {
constexpr int kInvalidArgument = 64;
constexpr int kNotFound = 66;
constexpr int kUnavailable = 69;
constexpr int kAlreadyExists = 73;
constexpr int kTempFail = 75;  // resource_exhausted (429), timeout (504)
constexpr int kProtocol = 76;
constexpr int kPermissionDenied = 77;
}  // namespace exit_code

// A bound on one template create that only proves it ended (they take seconds).
constexpr std::chrono::seconds kCreateBound(300);

// tests/registry in the source tree.
std::filesystem::path registryScripts();

// tests/registry/images.sh OUT NAMES...: name -> the OCI layout (cached across runs).
std::map<std::string, std::filesystem::path> buildTestImages(const std::filesystem::path& out,
                                                             const std::vector<std::string>& names);

// `template ls --json`'s entry for `name`, or null.
nlohmann::json templateNamed(const Daemon& d, const std::string& name);

// Failures of a create leave nothing: no template `name`, no image directory of it (finished
// or .tmp) under <state>/images, nothing in <state>/oci/tmp (the pulls' and imports' scratch).
// Empty when so; else what was left, for the assertion's message.
std::string leftoversOf(const Daemon& d, const std::string& name);

// Every blob in <state>/oci/blobs/sha256 holds what its name says (the layer cache is not
// poisoned). Empty when so; else the first that does not.
std::string poisonedBlob(const Daemon& d);

// A CLI run that must end: waits at most `bound`, then kills it. `ended` says which.
struct BoundedRun {
  CommandResult result;
  bool ended = false;
  std::chrono::steady_clock::duration took{};
};
BoundedRun runBounded(const Daemon& d, const std::vector<std::string>& args,
                      std::chrono::seconds bound);

}  // namespace hutch::e2e
