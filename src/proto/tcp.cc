#include "proto/tcp.h"

#include <arpa/inet.h>

#include "proto/json_fields.h"
#include "proto/schema.h"

namespace hutch::proto {

Result<> validate(const ConnectRequest& request) {
  if (request.port == 0) return fail(Errc::kInvalidArgument, "Port 0 cannot be connected to");
  if (request.address == "localhost") return ok();
  unsigned char buffer[16];
  if (::inet_pton(AF_INET, request.address.c_str(), buffer) != 1 &&
      ::inet_pton(AF_INET6, request.address.c_str(), buffer) != 1) {
    return fail(Errc::kInvalidArgument, "Address \"" + request.address +
                                            "\" is not an IPv4 or IPv6 address (names other than "
                                            "localhost are not resolved)");
  }
  return ok();
}

namespace detail {

template <>
struct Schema<ConnectRequest> {
  static constexpr const char* kName = "connect request";
  static constexpr auto kFields = std::tuple(field("port", &ConnectRequest::port),
                                             field("address", &ConnectRequest::address, kOptional));
  static Result<> check(const ConnectRequest& request) { return validate(request); }
};

template <>
struct Schema<ParkResult> {
  static constexpr const char* kName = "park result";
  static constexpr auto kFields =
      std::tuple(field("streams", &ParkResult::streams, kRequired,
                       {.range = Range{1, kMaxU32}, .items = "stream ids (1 to 2^32-1)"}));
};

template <>
struct Schema<ResumeRequest> {
  static constexpr const char* kName = "resume request";
  static constexpr auto kFields =
      std::tuple(field("stream", &ResumeRequest::stream, kRequired, {.range = Range{1, kMaxU32}}));
};

}  // namespace detail

HUTCH_PROTO_CODEC(ConnectRequest)
HUTCH_PROTO_CODEC(ParkResult)
HUTCH_PROTO_CODEC(ResumeRequest)

}  // namespace hutch::proto
