// Route table: method + path pattern ("/v1/boxes/{box}/exec") -> handler.
#pragma once

#include <algorithm>
#include <boost/beast/http/verb.hpp>
#include <functional>
#include <map>
#include <ostream>  // boost 1.74 string_view needs it before beast
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::api {

using PathParams = std::map<std::string, std::string, std::less<>>;

// "%41%20b" -> "A b": a path segment's percent-escapes decoded ('+' stays '+').
std::string decodePathSegment(std::string_view segment);

template <class Handler>
class Router {
 public:
  struct Match {
    const Handler* handler;
    PathParams params;
  };

  void add(boost::beast::http::verb method, std::string_view pattern, Handler handler) {
    routes_.push_back({method, split(pattern), std::move(handler)});
  }

  // kNotFound when no pattern matches the path; kUnsupported (405) when one does but not for
  // this method.
  Result<Match> match(boost::beast::http::verb method, std::string_view path) const {
    std::vector<std::string> segments = split(path);
    for (std::string& segment : segments) segment = decodePathSegment(segment);
    bool path_matched = false;
    for (const Route& route : routes_) {
      PathParams params;
      if (!matchSegments(route.segments, segments, params)) continue;
      path_matched = true;
      if (route.method == method) return Match{&route.handler, std::move(params)};
    }
    if (path_matched) {
      return fail(Errc::kUnsupported, "Method " +
                                          std::string(boost::beast::http::to_string(method)) +
                                          " is not allowed on " + std::string(path));
    }
    return fail(Errc::kNotFound, "No API endpoint " + std::string(path) + " (see docs/api.md)");
  }

  // The methods some route serves `path` with (for a 405's Allow header), in route order.
  std::vector<boost::beast::http::verb> methodsFor(std::string_view path) const {
    std::vector<std::string> segments = split(path);
    for (std::string& segment : segments) segment = decodePathSegment(segment);
    std::vector<boost::beast::http::verb> out;
    for (const Route& route : routes_) {
      PathParams params;
      if (!matchSegments(route.segments, segments, params)) continue;
      if (std::find(out.begin(), out.end(), route.method) == out.end()) {
        out.push_back(route.method);
      }
    }
    return out;
  }

 private:
  struct Route {
    boost::beast::http::verb method;
    std::vector<std::string> segments;
    Handler handler;
  };

  static std::vector<std::string> split(std::string_view path) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= path.size()) {
      size_t end = path.find('/', start);
      if (end == std::string_view::npos) end = path.size();
      if (end > start) out.emplace_back(path.substr(start, end - start));
      start = end + 1;
    }
    return out;
  }

  static bool matchSegments(const std::vector<std::string>& pattern,
                            const std::vector<std::string>& segments, PathParams& params) {
    if (pattern.size() != segments.size()) return false;
    for (size_t i = 0; i < pattern.size(); ++i) {
      const std::string& p = pattern[i];
      if (p.size() > 2 && p.front() == '{' && p.back() == '}') {
        params[p.substr(1, p.size() - 2)] = segments[i];
      } else if (p != segments[i]) {
        return false;
      }
    }
    return true;
  }

  std::vector<Route> routes_;
};

// Splits "a=1&b=two" into a map (percent-decoding values); a key without '=' maps to "".
PathParams parseQuery(std::string_view query);
// "true", "1", "yes" and "" (present without value) are true.
bool queryFlag(const PathParams& query, std::string_view key);

}  // namespace hutch::api
