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

std::string encodeMessage(const ParkResult& message) {
  return detail::dump({{"streams", message.streams}});
}

std::string encodeMessage(const ResumeRequest& message) {
  return detail::dump({{"stream", message.stream}});
}

template <>
Result<ParkResult> decodeMessage<ParkResult>(std::string_view payload) {
  HUTCH_TRY(detail::Json j, detail::parseObject(payload, "park result"));
  auto it = j.find("streams");
  if (it == j.end() || !it->is_array()) {
    return fail(Errc::kProtocol, "Field \"streams\" must be an array");
  }
  ParkResult result;
  for (const detail::Json& id : *it) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() == 0 || id.get<uint64_t>() > UINT32_MAX) {
      return fail(Errc::kProtocol, "Field \"streams\" must hold stream ids (1 to 2^32-1)");
    }
    result.streams.push_back(id.get<uint32_t>());
  }
  return result;
}

template <>
Result<ResumeRequest> decodeMessage<ResumeRequest>(std::string_view payload) {
  HUTCH_TRY(detail::Json j, detail::parseObject(payload, "resume request"));
  std::optional<int64_t> stream;
  HUTCH_TRY_VOID(detail::readInt(j, "stream", true, 1, UINT32_MAX, stream));
  return ResumeRequest{static_cast<uint32_t>(*stream)};
}

}  // namespace hutch::proto
