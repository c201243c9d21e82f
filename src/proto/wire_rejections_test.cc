// The decoders' errors, frozen: the exact code and message each decoder of the agent protocol
// gives for a representative set of bad payloads (one fault each). The peer logs them and users
// see them; wire_golden_test.cc freezes the encodings.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "proto/files.h"
#include "proto/identity.h"
#include "proto/messages.h"
#include "proto/processes.h"
#include "proto/services.h"
#include "proto/tcp.h"

namespace hutch::proto {
namespace {

// Each check's last two parameters are where it was called from, for its failure message:
// default arguments evaluated at the call site (clang 14, which clang-tidy runs, has no
// std::source_location).

std::string outcome(const Error& error) {
  return std::string(errcName(error.code())) + ": " + error.message();
}

// decodeMessage<T>(payload) fails with "<code>: <message>".
template <class T>
void expectRejected(std::string_view payload, std::string_view expected,
                    const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  const ::testing::ScopedTrace trace(file, line, payload);
  auto decoded = decodeMessage<T>(payload);
  ASSERT_FALSE(decoded);
  EXPECT_EQ(outcome(decoded.error()), expected);
}

void expectServiceSpecRejected(std::string_view payload, std::string_view expected,
                               const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  const ::testing::ScopedTrace trace(file, line, payload);
  auto decoded = parseServiceSpec(payload);
  ASSERT_FALSE(decoded);
  EXPECT_EQ(outcome(decoded.error()), expected);
}

// A FileInfo payload with one field replaced (or removed, with a null replacement).
std::string fileInfoWith(std::string_view key, std::string_view value) {
  std::string fields[][2] = {{"name", R"("a.txt")"}, {"path", R"("/home/a.txt")"},
                             {"type", R"("file")"},  {"size", "13"},
                             {"mode", "420"},        {"permissions", R"("-rw-r--r--")"},
                             {"uid", "0"},           {"gid", "0"},
                             {"owner", R"("root")"}, {"group", R"("root")"},
                             {"mtime_ns", "1"},      {"symlink_target", R"("")"}};
  std::string json = "{";
  for (auto& [k, v] : fields) {
    if (k == key && value.empty()) continue;
    if (json.size() > 1) json += ",";
    json += "\"" + k + "\":" + (k == key ? std::string(value) : v);
  }
  return json + "}";
}

TEST(WireRejectionsTest, HandshakeRejections) {
  expectRejected<Hello>("not json", R"(protocol: Malformed JSON in hello)");
  expectRejected<Hello>("[1]", R"(protocol: hello must be a JSON object)");
  expectRejected<Hello>(R"({"host":"x"})", R"(protocol: Missing field "version")");
  expectRejected<Hello>(R"({"version":"1"})", R"(protocol: Field "version" must be an integer)");
  expectRejected<Hello>(R"({"version":-1})", R"(protocol: Field "version" is out of range)");
  expectRejected<Hello>(R"({"version":4294967296})",
                        R"(protocol: Field "version" is out of range)");
  expectRejected<Hello>(R"({"version":1.5})", R"(protocol: Field "version" must be an integer)");
  expectRejected<Hello>(R"({"version":1,"host":5})", R"(protocol: Field "host" must be a string)");
  expectRejected<HelloAck>(R"({"version":1,"agent":"a"})",
                           R"(protocol: Missing field "capabilities")");
  expectRejected<HelloAck>(R"({"version":1,"agent":"a","capabilities":[1]})",
                           R"(protocol: Field "capabilities" must be an array of strings)");
  expectRejected<HelloAck>(R"({"version":1,"agent":"a","capabilities":"x"})",
                           R"(protocol: Field "capabilities" must be an array of strings)");
  expectRejected<HelloAck>(R"({"version":1,"capabilities":[]})",
                           R"(protocol: Missing field "agent")");
  expectRejected<ErrorMessage>(R"({"message":"x"})", R"(protocol: Missing field "code")");
  expectRejected<ErrorMessage>(R"({"code":1})", R"(protocol: Field "code" must be a string)");
  expectRejected<ErrorMessage>(R"({"code":"x","message":null})",
                               R"(protocol: Field "message" must be a string)");
}

TEST(WireRejectionsTest, ExecRejections) {
  expectRejected<ExecRequest>("{", R"(protocol: Malformed JSON in exec request)");
  expectRejected<ExecRequest>(R"({})", R"(protocol: Missing field "argv")");
  expectRejected<ExecRequest>(R"({"argv":"ls"})",
                              R"(protocol: Field "argv" must be an array of strings)");
  expectRejected<ExecRequest>(R"({"argv":["ls"],"env":{}})",
                              R"(protocol: Field "env" must be an array of strings)");
  expectRejected<ExecRequest>(R"({"argv":["ls"],"stdin":"yes"})",
                              R"(protocol: Field "stdin" must be a boolean)");
  expectRejected<ExecRequest>(R"({"argv":["ls"],"tty":1})",
                              R"(protocol: Field "tty" must be a boolean)");
  expectRejected<ExecRequest>(R"({"argv":["ls"],"rows":70000})",
                              R"(protocol: Field "rows" is out of range)");
  expectRejected<ExecRequest>(R"({"argv":["ls"],"cols":1.5})",
                              R"(protocol: Field "cols" must be an integer)");
  expectRejected<ExecRequest>(R"({"argv":["ls"],"cwd":7})",
                              R"(protocol: Field "cwd" must be a string)");
  expectRejected<ExecRequest>(R"({"argv":[]})", R"(invalid_argument: The command (argv) is empty)");
  expectRejected<ExecRequest>(R"({"argv":[""]})", R"(invalid_argument: The command name is empty)");
  expectRejected<ExecRequest>(R"({"argv":["a\u0000b"]})",
                              R"(invalid_argument: A command argument contains a NUL byte)");
  expectRejected<ExecRequest>(
      R"({"argv":["ls"],"env":["X"]})",
      R"(invalid_argument: Environment entry "X" must have the form KEY=VALUE)");
  expectRejected<ExecRequest>(R"({"argv":["ls"],"env":["X=\u0000"]})",
                              R"(invalid_argument: An environment entry contains a NUL byte)");
  expectRejected<ExecRequest>(R"({"argv":["ls"],"cwd":"rel"})",
                              R"(invalid_argument: The cwd "rel" must be absolute)");
  expectRejected<ExecRequest>(R"({"argv":["ls"],"user":"a\u0000"})",
                              R"(invalid_argument: The user contains a NUL byte)");
  expectRejected<ExecRequest>(
      R"({"argv":["ls"],"detach":true,"tty":true})",
      R"(invalid_argument: A detached process has no stdin and no terminal (drop stdin, tty and login_shell, or do not detach))");
  expectRejected<ExecRequest>(
      R"({"argv":["ls"],"login_shell":true})",
      R"(invalid_argument: A login shell request takes no command (argv must be empty))");
  expectRejected<Started>(R"({})", R"(protocol: Missing field "pid")");
  expectRejected<Started>(R"({"pid":0})", R"(protocol: Field "pid" is out of range)");
  expectRejected<Started>(R"({"pid":1,"id":3})", R"(protocol: Field "id" must be a string)");
  expectRejected<Started>(R"({"pid":1,"log":false})", R"(protocol: Field "log" must be a string)");
  expectRejected<ExitStatus>(
      R"({})", R"(protocol: Exit status must have exactly one of "code" and "signal")");
  expectRejected<ExitStatus>(
      R"({"code":1,"signal":2})",
      R"(protocol: Exit status must have exactly one of "code" and "signal")");
  expectRejected<ExitStatus>(R"({"code":256})", R"(protocol: Field "code" is out of range)");
  expectRejected<ExitStatus>(R"({"signal":0})", R"(protocol: Field "signal" is out of range)");
  expectRejected<ExitStatus>(R"({"code":"1"})", R"(protocol: Field "code" must be an integer)");
  expectRejected<ExitStatus>(R"("x")", R"(protocol: exit status must be a JSON object)");
  expectRejected<SignalRequest>(R"({"sig":9})", R"(protocol: Missing field "signal")");
  expectRejected<SignalRequest>(R"({"signal":2147483648})",
                                R"(protocol: Field "signal" is out of range)");
  expectRejected<WindowSize>(R"({"rows":1})", R"(protocol: Missing field "cols")");
  expectRejected<WindowSize>(R"({"cols":1})", R"(protocol: Missing field "rows")");
  expectRejected<WindowSize>(R"({"rows":-1,"cols":1})",
                             R"(protocol: Field "rows" is out of range)");
}

TEST(WireRejectionsTest, FileInfoRejections) {
  expectRejected<FileInfo>("[]", R"(protocol: file information must be a JSON object)");
  expectRejected<FileInfo>(fileInfoWith("name", ""), R"(protocol: Missing field "name")");
  expectRejected<FileInfo>(fileInfoWith("name", "1"), R"(protocol: Field "name" must be a string)");
  expectRejected<FileInfo>(fileInfoWith("name", R"("a/b")"),
                           R"(protocol: Field "name" must be one path component)");
  expectRejected<FileInfo>(fileInfoWith("name", R"("..")"),
                           R"(protocol: Field "name" must be one path component)");
  expectRejected<FileInfo>(fileInfoWith("name", R"("/")"),
                           R"(protocol: Field "name" must be one path component)");
  expectRejected<FileInfo>(fileInfoWith("path", ""), R"(protocol: Missing field "path")");
  expectRejected<FileInfo>(fileInfoWith("path", R"("a.txt")"),
                           R"(protocol: Field "path" must be an absolute path without NUL bytes)");
  expectRejected<FileInfo>(fileInfoWith("path", R"("/a\u0000")"),
                           R"(protocol: Field "path" must be an absolute path without NUL bytes)");
  expectRejected<FileInfo>(fileInfoWith("type", ""), R"(protocol: Missing field "type")");
  expectRejected<FileInfo>(fileInfoWith("type", R"("fifo")"),
                           R"(protocol: Unknown file type "fifo")");
  expectRejected<FileInfo>(fileInfoWith("type", "3"), R"(protocol: Field "type" must be a string)");
  expectRejected<FileInfo>(fileInfoWith("size", "-1"), R"(protocol: Field "size" is out of range)");
  expectRejected<FileInfo>(fileInfoWith("size", "18446744073709551615"),
                           R"(protocol: Field "size" is out of range)");
  expectRejected<FileInfo>(fileInfoWith("size", ""), R"(protocol: Missing field "size")");
  expectRejected<FileInfo>(fileInfoWith("mode", "4096"),
                           R"(protocol: Field "mode" is out of range)");
  expectRejected<FileInfo>(fileInfoWith("permissions", R"("rw")"),
                           R"(protocol: Field "permissions" must have 10 characters)");
  expectRejected<FileInfo>(fileInfoWith("permissions", ""),
                           R"(protocol: Missing field "permissions")");
  expectRejected<FileInfo>(fileInfoWith("uid", "4294967296"),
                           R"(protocol: Field "uid" is out of range)");
  expectRejected<FileInfo>(fileInfoWith("gid", "-1"), R"(protocol: Field "gid" is out of range)");
  expectRejected<FileInfo>(fileInfoWith("owner", "null"),
                           R"(protocol: Field "owner" must be a string)");
  expectRejected<FileInfo>(fileInfoWith("group", ""), R"(protocol: Missing field "group")");
  expectRejected<FileInfo>(fileInfoWith("mtime_ns", "1.5"),
                           R"(protocol: Field "mtime_ns" must be an integer)");
  expectRejected<FileInfo>(fileInfoWith("symlink_target", "[]"),
                           R"(protocol: Field "symlink_target" must be a string)");
  EXPECT_TRUE(decodeMessage<FileInfo>(fileInfoWith("symlink_target", "")));
}

TEST(WireRejectionsTest, FileRequestRejections) {
  expectRejected<FileStatRequest>(R"({})", R"(protocol: Missing field "path")");
  expectRejected<FileStatRequest>(R"({"path":""})", R"(invalid_argument: The path is empty)");
  expectRejected<FileStatRequest>(R"({"path":"a","follow":1})",
                                  R"(protocol: Field "follow" must be a boolean)");
  expectRejected<FileStatRequest>(R"({"path":"a","user":"a\u0000b"})",
                                  R"(invalid_argument: The user contains a NUL byte)");
  expectRejected<FileStatRequest>(R"({"path":"a\u0000"})",
                                  R"(invalid_argument: The path contains a NUL byte)");
  expectRejected<FileStatRequest>(R"({"path":")" + std::string(4096, 'a') + R"("})",
                                  R"(invalid_argument: The path is longer than 4095 bytes)");
  expectRejected<FileListRequest>(R"({"path":"/","depth":0})",
                                  R"(invalid_argument: The depth must be 1-32, not 0)");
  expectRejected<FileListRequest>(R"({"path":"/","depth":33})",
                                  R"(invalid_argument: The depth must be 1-32, not 33)");
  expectRejected<FileListRequest>(R"({"path":"/","max_entries":100001})",
                                  R"(invalid_argument: max_entries must be 1-100000, not 100001)");
  expectRejected<FileListRequest>(R"({"path":"/","max_entries":0})",
                                  R"(invalid_argument: max_entries must be 1-100000, not 0)");
  expectRejected<FileListRequest>(R"({"path":"/","depth":-1})",
                                  R"(protocol: Field "depth" is out of range)");
  expectRejected<FileListRequest>(R"({"path":"/","depth":4294967296})",
                                  R"(protocol: Field "depth" is out of range)");
  expectRejected<FileListRequest>(R"({"path":"/","user":[]})",
                                  R"(protocol: Field "user" must be a string)");
  expectRejected<FileMkdirRequest>(
      R"({"path":"/x","mode":4096})",
      R"(invalid_argument: The mode must be 0-07777 (permission bits))");
  expectRejected<FileMkdirRequest>(R"({"path":"/x","mode":-1})",
                                   R"(protocol: Field "mode" is out of range)");
  expectRejected<FileMkdirRequest>(R"({"path":"/x","parents":"y"})",
                                   R"(protocol: Field "parents" must be a boolean)");
  expectRejected<FileMoveRequest>(R"({"from":"/a"})", R"(protocol: Missing field "to")");
  expectRejected<FileMoveRequest>(R"({"to":"/a"})", R"(protocol: Missing field "from")");
  expectRejected<FileMoveRequest>(R"({"from":"","to":"/b"})",
                                  R"(invalid_argument: The source path is empty)");
  expectRejected<FileMoveRequest>(R"({"from":"/a","to":""})",
                                  R"(invalid_argument: The destination path is empty)");
  expectRejected<FileMoveRequest>(R"({"from":"/a","to":"/b","overwrite":0})",
                                  R"(protocol: Field "overwrite" must be a boolean)");
  expectRejected<FileRemoveRequest>(R"({"path":"/a","recursive":0})",
                                    R"(protocol: Field "recursive" must be a boolean)");
  expectRejected<FileRemoveRequest>(R"({"path":""})", R"(invalid_argument: The path is empty)");
  expectRejected<FileReadRequest>(R"({"path":""})", R"(invalid_argument: The path is empty)");
  expectRejected<FileReadRequest>(R"({"user":"x"})", R"(protocol: Missing field "path")");
  expectRejected<FileWriteRequest>(
      R"({"path":"/a","mode":4096})",
      R"(invalid_argument: The mode must be 0-07777 (permission bits))");
  expectRejected<FileWriteRequest>(R"({"path":"/a","mode":-1})",
                                   R"(protocol: Field "mode" is out of range)");
  expectRejected<FileWriteRequest>(R"({"path":"/a","owner":"a\u0000"})",
                                   R"(invalid_argument: The owner or group contains a NUL byte)");
  expectRejected<FileWriteRequest>(R"({"path":"/a","group":5})",
                                   R"(protocol: Field "group" must be a string)");
  expectRejected<FileWriteRequest>(R"({"path":"/a","parents":null})",
                                   R"(protocol: Field "parents" must be a boolean)");
  expectRejected<WatchRequest>(R"({"path":"/a","recursive":"x"})",
                               R"(protocol: Field "recursive" must be a boolean)");
  expectRejected<WatchRequest>(R"({"path":""})", R"(invalid_argument: The path is empty)");
}

TEST(WireRejectionsTest, FileResultRejections) {
  const std::string good = fileInfoWith("", "");  // every field, each good
  expectRejected<FileList>(R"({})", R"(protocol: Field "entries" must be an array)");
  expectRejected<FileList>(R"({"entries":{}})", R"(protocol: Field "entries" must be an array)");
  expectRejected<FileList>(R"({"entries":[1]})",
                           R"(protocol: A file's description must be a JSON object)");
  expectRejected<FileList>(R"({"entries":[{}]})", R"(protocol: Missing field "name")");
  expectRejected<FileList>(R"({"entries":[],"truncated":"no"})",
                           R"(protocol: Field "truncated" must be a boolean)");
  expectRejected<FileMkdirResult>(R"({"created":true})", R"(protocol: Missing field "entry")");
  expectRejected<FileMkdirResult>(R"({"entry":1,"created":true})",
                                  R"(protocol: A file's description must be a JSON object)");
  expectRejected<FileMkdirResult>(R"({"entry":)" + good + "}",
                                  R"(protocol: Missing field "created")");
  expectRejected<FileMkdirResult>(R"({"entry":{},"created":true})",
                                  R"(protocol: Missing field "name")");
  expectRejected<FileWriteOpened>(
      R"({"path":"rel"})", R"(protocol: Field "path" must be an absolute path without NUL bytes)");
  expectRejected<FileWriteOpened>(R"({})", R"(protocol: Missing field "path")");
  expectRejected<FileWriteOpened>(
      R"({"path":""})", R"(protocol: Field "path" must be an absolute path without NUL bytes)");
  expectRejected<FileEvents>(R"({})", R"(protocol: Field "events" must be an array)");
  expectRejected<FileEvents>(R"({"events":null})", R"(protocol: Field "events" must be an array)");
  expectRejected<FileEvents>(R"({"events":[1]})",
                             R"(protocol: A file event must be a JSON object)");
  expectRejected<FileEvents>(R"({"events":[{"type":"boom","path":"/a"}]})",
                             R"(protocol: Unknown file event type "boom")");
  expectRejected<FileEvents>(
      R"({"events":[{"type":"write","path":"a"}]})",
      R"(protocol: Field "path" must be an absolute path without NUL bytes)");
  expectRejected<FileEvents>(R"({"events":[{"path":"/a"}]})", R"(protocol: Missing field "type")");
  expectRejected<FileEvents>(R"({"events":[{"type":"write"}]})",
                             R"(protocol: Missing field "path")");
  expectRejected<FileEvents>(R"({"events":[],"overflow":1})",
                             R"(protocol: Field "overflow" must be a boolean)");
}

TEST(WireRejectionsTest, ProcessRejections) {
  const std::string base = R"("id":"x","pid":5,"argv":["a"])";
  expectRejected<ProcessInfo>("[]", R"(protocol: process must be a JSON object)");
  expectRejected<ProcessInfo>(R"({"pid":5,"argv":["a"],"running":true})",
                              R"(protocol: Missing field "id")");
  expectRejected<ProcessInfo>(R"({"id":"x","pid":0,"argv":["a"],"running":true})",
                              R"(protocol: Field "pid" is out of range)");
  expectRejected<ProcessInfo>(R"({"id":"x","pid":5,"argv":"a","running":true})",
                              R"(protocol: Field "argv" must be an array of strings)");
  expectRejected<ProcessInfo>("{" + base + "}", R"(protocol: Missing field "running")");
  expectRejected<ProcessInfo>(
      "{" + base + R"(,"running":false})",
      R"(protocol: An ended process needs exactly one of "code" and "signal")");
  expectRejected<ProcessInfo>(
      "{" + base + R"(,"running":false,"code":1,"signal":2})",
      R"(protocol: An ended process needs exactly one of "code" and "signal")");
  expectRejected<ProcessInfo>("{" + base + R"(,"running":true,"code":256})",
                              R"(protocol: Field "code" is out of range)");
  expectRejected<ProcessInfo>("{" + base + R"(,"running":false,"signal":128})",
                              R"(protocol: Field "signal" is out of range)");
  expectRejected<ProcessInfo>("{" + base + R"(,"running":true,"started_ns":-1})",
                              R"(protocol: Field "started_ns" is out of range)");
  expectRejected<ProcessInfo>("{" + base + R"(,"running":true,"user":1})",
                              R"(protocol: Field "user" must be a string)");
  expectRejected<ProcessInfo>("{" + base + R"(,"running":true,"log":1})",
                              R"(protocol: Field "log" must be a string)");
  expectRejected<ProcessInfo>("{" + base + R"(,"running":"no"})",
                              R"(protocol: Field "running" must be a boolean)");
  expectRejected<ProcessList>(R"({})", R"(protocol: Field "processes" must be an array)");
  expectRejected<ProcessList>(R"({"processes":[1]})",
                              R"(protocol: A process must be a JSON object)");
  expectRejected<ProcessList>(R"({"processes":[{"id":"x"}]})", R"(protocol: Missing field "pid")");
  expectRejected<SignalProcess>(R"({"signal":1})", R"(protocol: Missing field "id")");
  expectRejected<SignalProcess>(R"({"id":"x"})", R"(protocol: Missing field "signal")");
  expectRejected<SignalProcess>(R"({"id":"x","signal":"TERM"})",
                                R"(protocol: Field "signal" must be an integer)");
}

TEST(WireRejectionsTest, ServiceRejections) {
  expectServiceSpecRejected("nope", R"(protocol: Malformed JSON in service file)");
  expectServiceSpecRejected(R"({})", R"(protocol: Missing field "argv")");
  expectServiceSpecRejected(
      R"({"argv":["x"],"restart":"sometimes"})",
      R"(invalid_argument: Restart policy "sometimes" is not one of always, on-failure, never)");
  expectServiceSpecRejected(R"({"argv":["x"],"restart":1})",
                            R"(protocol: Field "restart" must be a string)");
  expectServiceSpecRejected(R"({"argv":[]})", R"(invalid_argument: The command (argv) is empty)");
  expectServiceSpecRejected(R"({"argv":["x"],"cwd":"rel"})",
                            R"(invalid_argument: The cwd "rel" must be absolute)");
  expectServiceSpecRejected(
      R"({"argv":["x"],"env":["A"]})",
      R"(invalid_argument: Environment entry "A" must have the form KEY=VALUE)");
  expectServiceSpecRejected(R"({"argv":["x"],"user":2})",
                            R"(protocol: Field "user" must be a string)");
  expectRejected<ServiceList>(R"({})", R"(protocol: Field "services" must be an array)");
  expectRejected<ServiceList>(R"({"services":[1]})",
                              R"(protocol: A service must be a JSON object)");
  expectRejected<ServiceList>(R"({"services":[{"state":"running"}]})",
                              R"(protocol: Missing field "name")");
  expectRejected<ServiceList>(R"({"services":[{"name":"a"}]})",
                              R"(protocol: Missing field "state")");
  expectRejected<ServiceList>(R"({"services":[{"name":"a","state":"s","pid":-1}]})",
                              R"(protocol: Field "pid" is out of range)");
  expectRejected<ServiceList>(R"({"services":[{"name":"a","state":"s","restarts":-1}]})",
                              R"(protocol: Field "restarts" is out of range)");
  expectRejected<ServiceList>(R"({"services":[{"name":"a","state":"s","started_ns":-1}]})",
                              R"(protocol: Field "started_ns" is out of range)");
  expectRejected<ServiceList>(R"({"services":[{"name":"a","state":"s","last_exit":5}]})",
                              R"(protocol: exit status must be a JSON object)");
  expectRejected<ServiceList>(
      R"({"services":[{"name":"a","state":"s","last_exit":{}}]})",
      R"(protocol: Exit status must have exactly one of "code" and "signal")");
  expectRejected<ServiceList>(R"({"services":[{"name":"a","state":"s","last_exit":{"code":300}}]})",
                              R"(protocol: Field "code" is out of range)");
  expectRejected<ServiceList>(R"({"services":[{"name":"a","state":"s","error":1}]})",
                              R"(protocol: Field "error" must be a string)");
  expectRejected<ServiceList>(R"({"services":[{"name":"a","state":"s","log":1}]})",
                              R"(protocol: Field "log" must be a string)");
}

TEST(WireRejectionsTest, TcpAndIdentityRejections) {
  expectRejected<ConnectRequest>(R"({})", R"(protocol: Missing field "port")");
  expectRejected<ConnectRequest>(R"({"port":0})",
                                 R"(invalid_argument: Port 0 cannot be connected to)");
  expectRejected<ConnectRequest>(R"({"port":70000})", R"(protocol: Field "port" is out of range)");
  expectRejected<ConnectRequest>(
      R"({"port":80,"address":"example.com"})",
      R"(invalid_argument: Address "example.com" is not an IPv4 or IPv6 address (names other than localhost are not resolved))");
  expectRejected<ConnectRequest>(R"({"port":80,"address":1})",
                                 R"(protocol: Field "address" must be a string)");
  expectRejected<ParkResult>(R"({})", R"(protocol: Field "streams" must be an array)");
  expectRejected<ParkResult>(R"({"streams":1})", R"(protocol: Field "streams" must be an array)");
  expectRejected<ParkResult>(R"({"streams":[0]})",
                             R"(protocol: Field "streams" must hold stream ids (1 to 2^32-1))");
  expectRejected<ParkResult>(R"({"streams":[-1]})",
                             R"(protocol: Field "streams" must hold stream ids (1 to 2^32-1))");
  expectRejected<ParkResult>(R"({"streams":["1"]})",
                             R"(protocol: Field "streams" must hold stream ids (1 to 2^32-1))");
  expectRejected<ParkResult>(R"({"streams":[1.0]})",
                             R"(protocol: Field "streams" must hold stream ids (1 to 2^32-1))");
  expectRejected<ParkResult>(R"({"streams":[4294967296]})",
                             R"(protocol: Field "streams" must hold stream ids (1 to 2^32-1))");
  expectRejected<ResumeRequest>(R"({})", R"(protocol: Missing field "stream")");
  expectRejected<ResumeRequest>(R"({"stream":0})", R"(protocol: Field "stream" is out of range)");
  expectRejected<ResumeRequest>(R"({"stream":4294967296})",
                                R"(protocol: Field "stream" is out of range)");
  expectRejected<Identity>("[]", R"(protocol: identity must be a JSON object)");
  expectRejected<Identity>(
      R"({"hostname":"-x"})",
      R"(invalid_argument: Hostname "-x" is not valid: use 1-64 letters, digits, '-' and '.', not starting with '-' or '.')");
  expectRejected<Identity>(R"({"hostname":1})", R"(protocol: Field "hostname" must be a string)");
  expectRejected<Identity>(
      R"({"machine_id":"00"})",
      R"(invalid_argument: Machine id "00" is not 32 lowercase hex digits (not all zero))");
  expectRejected<Identity>(R"({"time_ns":0})",
                           R"(invalid_argument: The time must be after 1970 (time_ns > 0))");
  expectRejected<Identity>(R"({"time_ns":"1"})", R"(protocol: Field "time_ns" must be an integer)");
  expectRejected<Identity>(
      R"({"seed":"zz"})", R"(invalid_argument: The seed is not hex: Hex text has a non-hex digit)");
  expectRejected<Identity>(R"({"seed":"00"})",
                           R"(invalid_argument: The seed must be 32-64 bytes, got 1)");
  expectRejected<Identity>(R"({"grow_root":"yes"})",
                           R"(protocol: Field "grow_root" must be a boolean)");
  expectRejected<IdentityResult>(R"({"root_bytes":-1})",
                                 R"(protocol: Field "root_bytes" is out of range)");
  expectRejected<IdentityResult>(R"({"root_grown":1})",
                                 R"(protocol: Field "root_grown" must be a boolean)");
}

}  // namespace
}  // namespace hutch::proto
