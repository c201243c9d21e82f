// The remote API's WebSocket (GET /v1/boxes/{box}/exec/ws, exec_handlers.cc): frames from a
// client read by Beast's WebSocket stream with the handler's options (message limit, no
// automatic fragmentation), the first message read as the exec request (parseExecStart), the
// next ones as stdin (binary, channel 0) or control messages (parseWsControl).
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/websocket/stream.hpp>

#include "api/exec_model.h"
#include "proto/frame.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;

http::request<http::string_body> upgradeRequest() {
  http::request<http::string_body> req{http::verb::get, "/v1/boxes/dev/exec/ws", 11};
  req.set(http::field::host, "localhost");
  req.set(http::field::upgrade, "websocket");
  req.set(http::field::connection, "Upgrade");
  req.set(http::field::sec_websocket_key, "dGhlIHNhbXBsZSBub25jZQ==");
  req.set(http::field::sec_websocket_version, "13");
  req.set(http::field::sec_websocket_protocol, "hutch.exec.v1");
  return req;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const http::request<http::string_body> request = upgradeRequest();
  boost::asio::io_context ioc;
  websocket::stream<beast::test::stream> ws(ioc);
  beast::test::stream client(ioc);
  ws.next_layer().connect(client);
  ws.read_message_max(hutch::proto::kMaxPayload + 1);
  ws.auto_fragment(false);
  boost::system::error_code ec;
  ws.accept(request, ec);
  if (ec) return 0;
  ws.next_layer().append(beast::string_view(reinterpret_cast<const char*>(data), size));
  ws.next_layer().close_remote();
  bool first = true;
  while (true) {
    beast::flat_buffer buffer;
    ws.read(buffer, ec);
    if (ec) break;
    std::string message = beast::buffers_to_string(buffer.data());
    if (first) {
      first = false;
      if (ws.got_text()) (void)hutch::api::parseExecStart(message);
    } else if (ws.got_text()) {
      (void)hutch::api::parseWsControl(message);
    }
    client.clear();  // what the server wrote back (pongs): not kept
  }
  return 0;
}
