// A Dockerfile and its build context made into a BuildPlan (template_builder.h): the stage to
// build (the last, or --target), its FROM as a base image or template, its instructions as steps
// with Docker's variable expansion (ARG and ENV, the base image's ENV included), and its COPY
// sources resolved in the context (.dockerignore was applied by the client that sent it).
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "base/result.h"
#include "box/template_builder.h"

namespace hutch::box {

struct DockerfileOptions {
  std::string dockerfile = "Dockerfile";  // its path in the context
  std::map<std::string, std::string> build_args;
  std::string target;  // the stage to build; "": the last
  // Size, cache, start command and network of the build: kept as given.
  BuildPlan plan;
};

// `base_env` looks up a template's or image's ENV for expansion after FROM; the plan's steps
// refer to files under `context` (it must stay until the build is over). kInvalidArgument for
// what the Dockerfile gets wrong ("Dockerfile line N: ..."), kUnsupported for what hutch's
// builds do not do (multi-stage COPY --from is resolved by the builder).
Result<BuildPlan> planFromDockerfile(const std::filesystem::path& context,
                                     const DockerfileOptions& options);

}  // namespace hutch::box
