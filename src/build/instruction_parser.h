// The per-instruction half of the Dockerfile parser (dockerfile.cc reads lines, directives,
// continuations and heredoc bodies, and assembles stages): one logical line, split by
// instruction_words.h, turned into a typed Payload. Internal to src/build; errors are returned
// without the "Dockerfile line N:" prefix the caller adds.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "build/dockerfile.h"
#include "build/instruction_words.h"

namespace hutch::build::detail {

// One EXPOSE word (expanded): ports first..last of proto. The checks of normalizePorts, without
// listing the ports (a parse must stay cheap on `EXPOSE 0-65535` repeated).
struct PortRange {
  int first = 0;
  int last = 0;
  std::string proto;
};
Result<PortRange> parsePort(std::string_view word);

// Dockerfile::findStage over a list of stages.
std::optional<size_t> findStageIn(const std::vector<Stage>& stages, std::string_view name,
                                  size_t before);

// What a payload may refer to: the stages before this instruction's.
struct PayloadContext {
  char escape = '\\';
  const std::vector<Stage>* stages = nullptr;  // the stages so far, the current one last
};

// The typed payload of one instruction. `heredocs` carry their bodies (RUN, COPY, ADD only).
Result<Payload> parsePayload(Keyword keyword, const InstructionLine& line,
                             std::vector<Heredoc> heredocs, const PayloadContext& context);

}  // namespace hutch::build::detail
