// An HTTP request as hutchd's server reads it from a client (http_server.cc): the header with
// Beast's parser and the server's header limit, the target split into path and query, the query
// parsed (parseQuery, and the files endpoints' parseFileQuery), the path matched against the
// API's route patterns (Router, percent-decoding), then a JSON body by the model parsers that
// take one.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <string>

#include "api/exec_model.h"
#include "api/file_model.h"
#include "api/json_model.h"
#include "api/router.h"
#include "fuzz_input.h"

namespace {

namespace http = boost::beast::http;
using namespace hutch::api;

// The server's limits (http_server.cc).
constexpr size_t kMaxHeader = 64u << 10;
constexpr size_t kMaxBody = 8u << 20;

const Router<int>& routes() {
  static const Router<int> table = [] {
    using http::verb;
    Router<int> r;
    int n = 0;
    for (const char* p :
         {"/v1/boxes", "/v1/boxes/{box}", "/v1/boxes/{box}/exec", "/v1/boxes/{box}/exec/ws",
          "/v1/boxes/{box}/files", "/v1/boxes/{box}/files/archive", "/v1/boxes/{box}/files/list",
          "/v1/boxes/{box}/checkpoints/{checkpoint}", "/v1/boxes/{box}/ports/{port}",
          "/v1/boxes/{box}/processes/{id}/signal", "/v1/keys/{name}", "/v1/secrets/{name}",
          "/v1/templates/{template}", "/v1/events"}) {
      r.add(verb::get, p, n++);
      r.add(verb::post, p, n++);
    }
    r.add(verb::delete_, "/v1/boxes/{box}", n++);
    r.add(verb::put, "/v1/boxes/{box}/timeout", n++);
    return r;
  }();
  return table;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hutch::fuzz::FuzzInput input(data, size);
  std::string_view bytes = input.rest();
  http::request_parser<http::string_body> parser;
  parser.header_limit(kMaxHeader);
  parser.body_limit(kMaxBody);
  parser.eager(true);
  boost::system::error_code ec;
  size_t used = parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
  if (!ec && !parser.is_done() && used == bytes.size()) parser.put_eof(ec);
  if (!parser.is_header_done()) return 0;
  const auto& request = parser.get();
  std::string target(request.target());
  size_t q = target.find('?');
  std::string path = target.substr(0, q);
  PathParams query = parseQuery(q == std::string::npos ? std::string() : target.substr(q + 1));
  (void)queryFlag(query, "force");
  (void)parseFileQuery(query, {"depth", "recursive", "mode", "owner", "group"});
  auto match = routes().match(request.method(), path);
  if (!match) (void)routes().methodsFor(path);
  if (!parser.is_done()) return 0;
  const std::string& body = request.body();
  (void)parseCreateBox(body);
  (void)parseExecRun(body);
  return 0;
}
