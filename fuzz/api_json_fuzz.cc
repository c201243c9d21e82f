// The API's JSON request bodies, fed by a client (docs/api.md): the first byte picks the parser
// the rest goes to. A body that parses is written back with toJson where the API has one and
// must parse again to the same value. Also the client-side readers of the API's answers
// (boxFromJson, portStatusFromJson, errorFromResponse), which a remote hutchd feeds.
#include <cstdlib>
#include <string>

#include "api/encoding.h"
#include "api/exec_model.h"
#include "api/file_model.h"
#include "api/json_model.h"
#include "fuzz_input.h"

namespace {

using namespace hutch::api;

void createBox(std::string_view body) {
  auto request = parseCreateBox(body);
  if (!request) return;
  auto again = parseCreateBox(toJson(*request).dump());
  if (!again) std::abort();
  // A lifetime becomes an absolute time (expires_at) when parsed, which toJson does not write:
  // the CLI sends timeout_s itself.
  again->expires_at = request->expires_at;
  again->on_expiry = request->on_expiry;
  if (!(*again == *request)) std::abort();
}

void portForward(std::string_view body) {
  auto forward = parsePortForward(body);
  if (!forward) return;
  auto again = parsePortForward(toJson(*forward).dump());
  if (!again || !(*again == *forward)) std::abort();
}

void answers(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return;
  if (auto b = boxFromJson(j)) (void)toJson(*b).dump();
  (void)portStatusFromJson(j);
  (void)errorFromResponse(400, body);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hutch::fuzz::FuzzInput input(data, size);
  uint8_t which = input.byte();
  std::string_view body = input.rest();
  switch (which % 16) {
    case 0: createBox(body); break;
    case 1: (void)parseLifetime(body); break;
    case 2: (void)parseFork(body); break;
    case 3: (void)parseCheckpoint(body); break;
    case 4: (void)parseRollback(body); break;
    case 5: portForward(body); break;
    case 6:
      if (auto run = parseExecRun(body)) (void)hutch::proto::validate(run->exec);
      break;
    case 7:
      if (auto start = parseExecStart(body)) (void)hutch::proto::validate(start->exec);
      break;
    case 8:
      if (auto start = parseExecRequest(body, "the exec request")) {
        (void)hutch::proto::validate(start->exec);
      }
      break;
    case 9: (void)parseMkdir(body); break;
    case 10: (void)parseMove(body); break;
    case 11: (void)parseWsControl(body); break;
    case 12: answers(body); break;
    case 13:
      (void)base64Decode(body, "the body");
      (void)isValidUtf8(body);
      break;
    case 14: (void)parseOctalMode(body, "mode"); break;
    default: (void)parseObject(body); break;
  }
  return 0;
}
