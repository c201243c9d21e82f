#include "proto/tcp.h"

#include <arpa/inet.h>

#include "proto/json_fields.h"

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

std::string encodeMessage(const ConnectRequest& message) {
  return detail::dump({{"port", message.port}, {"address", message.address}});
}

template <>
Result<ConnectRequest> decodeMessage<ConnectRequest>(std::string_view payload) {
  HUTCH_TRY(detail::Json j, detail::parseObject(payload, "connect request"));
  ConnectRequest request;
  std::optional<int64_t> port;
  HUTCH_TRY_VOID(detail::readInt(j, "port", true, 0, 65535, port));
  request.port = static_cast<uint16_t>(*port);
  HUTCH_TRY_VOID(detail::readString(j, "address", false, request.address));
  HUTCH_TRY_VOID(validate(request));
  return request;
}

}  // namespace hutch::proto
