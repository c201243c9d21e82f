// The wire format, frozen: every message type encoded to the exact JSON text the agent protocol
// carries (docs/protocol.md), and decoded back to the same value (wire_rejections_test.cc
// freezes the decoders' errors). A change here is a protocol change: the other side of a box may
// be an older or newer build.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "proto/files.h"
#include "proto/identity.h"
#include "proto/messages.h"
#include "proto/processes.h"
#include "proto/services.h"
#include "proto/tcp.h"
#include "proto/test_samples.h"

namespace hutch::proto {
namespace {

using testing::regularFile;

// Each check's last two parameters are where it was called from, for its failure message:
// default arguments evaluated at the call site (clang 14, which clang-tidy runs, has no
// std::source_location).

// encodeMessage(value) is exactly golden, and golden decodes to value.
template <class T>
void expectWire(const T& value, std::string_view golden, const char* file = __builtin_FILE(),
                int line = __builtin_LINE()) {
  const ::testing::ScopedTrace trace(file, line, "golden");
  const std::string encoded = encodeMessage(value);
  EXPECT_EQ(encoded, golden);
  auto decoded = decodeMessage<T>(golden);
  ASSERT_TRUE(decoded) << decoded.error().message();
  EXPECT_EQ(*decoded, value);
}

void expectServiceSpec(const ServiceSpec& spec, std::string_view golden,
                       const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  const ::testing::ScopedTrace trace(file, line, "golden");
  const std::string encoded = encodeServiceSpec(spec);
  EXPECT_EQ(encoded, golden);
  auto decoded = parseServiceSpec(golden);
  ASSERT_TRUE(decoded) << decoded.error().message();
  EXPECT_EQ(*decoded, spec);
}

FileInfo directory() {
  FileInfo info = regularFile();
  info.name = "src";
  info.path = "/home/hutch/src";
  info.type = FileType::kDir;
  info.size = 4096;
  info.mode = 01777;
  info.permissions = "drwxrwxrwt";
  return info;
}

FileInfo symlink() {
  FileInfo info = regularFile();
  info.name = "l";
  info.path = "/l";
  info.type = FileType::kSymlink;
  info.mode = 0777;
  info.permissions = "lrwxrwxrwx";
  info.symlink_target = "../etc/passwd";
  return info;
}

FileInfo root() {
  FileInfo info;
  info.name = "/";
  info.path = "/";
  info.type = FileType::kDir;
  info.mode = 0755;
  info.permissions = "drwxr-xr-x";
  info.owner = "root";
  info.group = "root";
  info.mtime_ns = -5;
  return info;
}

FileInfo device() {
  FileInfo info = regularFile();
  info.name = "null";
  info.path = "/dev/null";
  info.type = FileType::kOther;
  info.size = 0;
  info.mode = 06666;
  info.permissions = "crw-rw-rw-";
  info.uid = 4294967295;
  info.gid = 0;
  return info;
}

TEST(WireGoldenTest, Handshake) {
  expectWire(Hello{1, "hutchd"}, R"({"host":"hutchd","version":1})");
  expectWire(Hello{7, ""}, R"({"version":7})");
  expectWire(HelloAck{1, "0.1.0", {"exec", "tty", "files"}},
             R"({"agent":"0.1.0","capabilities":["exec","tty","files"],"version":1})");
  expectWire(HelloAck{4294967295, "", {}},
             R"({"agent":"","capabilities":[],"version":4294967295})");
  expectWire(ErrorMessage{"not_found", "No such file \"/a\""},
             R"({"code":"not_found","message":"No such file \"/a\""})");
  expectWire(ErrorMessage{"protocol", ""}, R"({"code":"protocol","message":""})");
}

TEST(WireGoldenTest, Exec) {
  expectWire(ExecRequest{{"true"}, {}, "", "", false, false},
             R"({"argv":["true"],"env":[],"stdin":false})");
  ExecRequest full{{"ls", "-l", "a b"}, {"A=1", "B="}, "/tmp", "1000", true, false};
  expectWire(
      full,
      R"({"argv":["ls","-l","a b"],"cwd":"/tmp","env":["A=1","B="],"stdin":true,"user":"1000"})");
  ExecRequest tty;
  tty.argv = {"/bin/bash"};
  tty.tty = true;
  tty.rows = 24;
  tty.cols = 65535;
  expectWire(tty,
             R"({"argv":["/bin/bash"],"cols":65535,"env":[],"rows":24,"stdin":false,"tty":true})");
  ExecRequest login;
  login.login_shell = true;
  login.tty = true;
  login.user = "hutch";
  expectWire(login,
             R"({"argv":[],"env":[],"login_shell":true,"stdin":false,"tty":true,"user":"hutch"})");
  ExecRequest detached;
  detached.argv = {"sleep", "100"};
  detached.detach = true;
  detached.env = {"PATH=/bin"};
  expectWire(detached,
             R"({"argv":["sleep","100"],"detach":true,"env":["PATH=/bin"],"stdin":false})");
  expectWire(Started{42}, R"({"pid":42})");
  expectWire(Started{7, "0a1b2c3d", "/var/log/hutch/0a1b2c3d.log"},
             R"({"id":"0a1b2c3d","log":"/var/log/hutch/0a1b2c3d.log","pid":7})");
  expectWire(ExitStatus::exited(0), R"({"code":0})");
  expectWire(ExitStatus::exited(255), R"({"code":255})");
  expectWire(ExitStatus::signaled(9), R"({"signal":9})");
  expectWire(SignalRequest{15}, R"({"signal":15})");
  expectWire(SignalRequest{-3}, R"({"signal":-3})");
  expectWire(WindowSize{24, 80}, R"({"cols":80,"rows":24})");
  expectWire(WindowSize{0, 0}, R"({"cols":0,"rows":0})");
}

TEST(WireGoldenTest, Window) {
  EXPECT_EQ(encodeWindow(0x01020304), std::string("\x04\x03\x02\x01", 4));
  EXPECT_EQ(decodeWindow(std::string("\x04\x03\x02\x01", 4)).value(), 0x01020304u);
  EXPECT_EQ(decodeWindow("abc").error(),
            Error(Errc::kProtocol, "Window payload must be 4 bytes, got 3"));
}

TEST(WireGoldenTest, FileInfos) {
  expectWire(
      regularFile(),
      R"({"gid":1000,"group":"hutch","mode":420,"mtime_ns":1764400000123456789,"name":"a.txt","owner":"hutch","path":"/home/hutch/a.txt","permissions":"-rw-r--r--","size":13,"symlink_target":"","type":"file","uid":1000})");
  expectWire(
      directory(),
      R"({"gid":1000,"group":"hutch","mode":1023,"mtime_ns":1764400000123456789,"name":"src","owner":"hutch","path":"/home/hutch/src","permissions":"drwxrwxrwt","size":4096,"symlink_target":"","type":"dir","uid":1000})");
  expectWire(
      symlink(),
      R"({"gid":1000,"group":"hutch","mode":511,"mtime_ns":1764400000123456789,"name":"l","owner":"hutch","path":"/l","permissions":"lrwxrwxrwx","size":13,"symlink_target":"../etc/passwd","type":"symlink","uid":1000})");
  expectWire(
      root(),
      R"({"gid":0,"group":"root","mode":493,"mtime_ns":-5,"name":"/","owner":"root","path":"/","permissions":"drwxr-xr-x","size":0,"symlink_target":"","type":"dir","uid":0})");
  expectWire(
      device(),
      R"({"gid":0,"group":"hutch","mode":3510,"mtime_ns":1764400000123456789,"name":"null","owner":"hutch","path":"/dev/null","permissions":"crw-rw-rw-","size":0,"symlink_target":"","type":"other","uid":4294967295})");
}

TEST(WireGoldenTest, FileRequests) {
  expectWire(FileStatRequest{"a.txt"}, R"({"follow":false,"path":"a.txt"})");
  expectWire(FileStatRequest{"/etc", "hutch", true},
             R"({"follow":true,"path":"/etc","user":"hutch"})");
  expectWire(FileListRequest{"/"}, R"({"depth":1,"max_entries":10000,"path":"/"})");
  expectWire(FileListRequest{"/home", "1000", 32, 100000},
             R"({"depth":32,"max_entries":100000,"path":"/home","user":"1000"})");
  expectWire(FileMkdirRequest{"/x"}, R"({"mode":493,"parents":true,"path":"/x"})");
  expectWire(FileMkdirRequest{"d", "hutch", 0700, false},
             R"({"mode":448,"parents":false,"path":"d","user":"hutch"})");
  expectWire(FileMoveRequest{"/a", "/b"}, R"({"from":"/a","overwrite":false,"to":"/b"})");
  expectWire(FileMoveRequest{"a", "b", "hutch", true},
             R"({"from":"a","overwrite":true,"to":"b","user":"hutch"})");
  expectWire(FileRemoveRequest{"/a"}, R"({"path":"/a","recursive":false})");
  expectWire(FileRemoveRequest{"/a", "root", true},
             R"({"path":"/a","recursive":true,"user":"root"})");
  expectWire(FileReadRequest{"/a"}, R"({"path":"/a"})");
  expectWire(FileReadRequest{"/a", "hutch"}, R"({"path":"/a","user":"hutch"})");
  expectWire(FileWriteRequest{"/a"}, R"({"parents":true,"path":"/a"})");
  expectWire(
      FileWriteRequest{"/a", "hutch", 0600, "www-data", "adm", false},
      R"({"group":"adm","mode":384,"owner":"www-data","parents":false,"path":"/a","user":"hutch"})");
  expectWire(FileWriteRequest{"/a", "", 0}, R"({"mode":0,"parents":true,"path":"/a"})");
  expectWire(WatchRequest{"/a"}, R"({"path":"/a","recursive":false})");
  expectWire(WatchRequest{"/a", "hutch", true}, R"({"path":"/a","recursive":true,"user":"hutch"})");
}

TEST(WireGoldenTest, FileResults) {
  expectWire(FileList{}, R"({"entries":[],"truncated":false})");
  expectWire(
      FileList{{regularFile(), symlink()}, true},
      R"({"entries":[{"gid":1000,"group":"hutch","mode":420,"mtime_ns":1764400000123456789,"name":"a.txt","owner":"hutch","path":"/home/hutch/a.txt","permissions":"-rw-r--r--","size":13,"symlink_target":"","type":"file","uid":1000},{"gid":1000,"group":"hutch","mode":511,"mtime_ns":1764400000123456789,"name":"l","owner":"hutch","path":"/l","permissions":"lrwxrwxrwx","size":13,"symlink_target":"../etc/passwd","type":"symlink","uid":1000}],"truncated":true})");
  expectWire(
      FileMkdirResult{directory(), true},
      R"({"created":true,"entry":{"gid":1000,"group":"hutch","mode":1023,"mtime_ns":1764400000123456789,"name":"src","owner":"hutch","path":"/home/hutch/src","permissions":"drwxrwxrwt","size":4096,"symlink_target":"","type":"dir","uid":1000}})");
  expectWire(
      FileMkdirResult{root(), false},
      R"({"created":false,"entry":{"gid":0,"group":"root","mode":493,"mtime_ns":-5,"name":"/","owner":"root","path":"/","permissions":"drwxr-xr-x","size":0,"symlink_target":"","type":"dir","uid":0}})");
  expectWire(FileWriteOpened{"/home/hutch/a.txt"}, R"({"path":"/home/hutch/a.txt"})");
  expectWire(FileEvents{}, R"({"events":[]})");
  expectWire(
      FileEvents{{{FileEventType::kCreate, "/a"},
                  {FileEventType::kWrite, "/a"},
                  {FileEventType::kRemove, "/b"},
                  {FileEventType::kRename, "/c d"},
                  {FileEventType::kChmod, "/\xc3\xa9"}},
                 true},
      R"({"events":[{"path":"/a","type":"create"},{"path":"/a","type":"write"},{"path":"/b","type":"remove"},{"path":"/c d","type":"rename"},{"path":"/é","type":"chmod"}],"overflow":true})");
}

ProcessInfo runningProcess() {
  ProcessInfo p;
  p.id = "0a1b2c3d";
  p.pid = 321;
  p.argv = {"sleep", "100"};
  p.user = "hutch";
  p.started_ns = 1764400000123456789;
  p.log = "/var/log/hutch/0a1b2c3d.log";
  return p;
}

TEST(WireGoldenTest, Processes) {
  expectWire(
      runningProcess(),
      R"({"argv":["sleep","100"],"id":"0a1b2c3d","log":"/var/log/hutch/0a1b2c3d.log","pid":321,"running":true,"started_ns":1764400000123456789,"user":"hutch"})");
  ProcessInfo exited = runningProcess();
  exited.exit = ExitStatus::exited(3);
  exited.user = "";
  expectWire(
      exited,
      R"({"argv":["sleep","100"],"code":3,"id":"0a1b2c3d","log":"/var/log/hutch/0a1b2c3d.log","pid":321,"running":false,"started_ns":1764400000123456789,"user":""})");
  ProcessInfo killed = runningProcess();
  killed.exit = ExitStatus::signaled(15);
  killed.started_ns = 0;
  expectWire(
      killed,
      R"({"argv":["sleep","100"],"id":"0a1b2c3d","log":"/var/log/hutch/0a1b2c3d.log","pid":321,"running":false,"signal":15,"started_ns":0,"user":"hutch"})");
  expectWire(ProcessList{}, R"({"processes":[]})");
  expectWire(
      ProcessList{{runningProcess(), exited}},
      R"({"processes":[{"argv":["sleep","100"],"id":"0a1b2c3d","log":"/var/log/hutch/0a1b2c3d.log","pid":321,"running":true,"started_ns":1764400000123456789,"user":"hutch"},{"argv":["sleep","100"],"code":3,"id":"0a1b2c3d","log":"/var/log/hutch/0a1b2c3d.log","pid":321,"running":false,"started_ns":1764400000123456789,"user":""}]})");
  expectWire(SignalProcess{"0a1b2c3d", 15}, R"({"id":"0a1b2c3d","signal":15})");
}

TEST(WireGoldenTest, Services) {
  expectServiceSpec(ServiceSpec{{"/usr/sbin/dockerd"}},
                    R"({"argv":["/usr/sbin/dockerd"],"restart":"always"})");
  expectServiceSpec(
      ServiceSpec{{"/usr/sbin/dockerd", "-H", "unix://"},
                  {"A=1"},
                  "root",
                  "/var/lib",
                  RestartPolicy::kOnFailure},
      R"({"argv":["/usr/sbin/dockerd","-H","unix://"],"cwd":"/var/lib","env":["A=1"],"restart":"on-failure","user":"root"})");
  expectServiceSpec(ServiceSpec{{"x"}, {}, "", "", RestartPolicy::kNever},
                    R"({"argv":["x"],"restart":"never"})");
  expectWire(ServiceList{}, R"({"services":[]})");
  ServiceStatus running{"docker",
                        "running",
                        123,
                        2,
                        1764400000123456789,
                        std::nullopt,
                        "",
                        "/var/log/hutch/services/docker.log"};
  ServiceStatus exited{"web", "stopped", 0, 0, 5, ExitStatus::exited(1), "", "/l"};
  ServiceStatus killed{"db", "restarting", 0, 7, 6, ExitStatus::signaled(9), "", ""};
  ServiceStatus failed{"bad", "failed", 0, 0, 0, std::nullopt, "Field \"argv\" is missing", ""};
  expectWire(
      ServiceList{{running, exited, killed, failed}},
      R"({"services":[{"log":"/var/log/hutch/services/docker.log","name":"docker","pid":123,"restarts":2,"started_ns":1764400000123456789,"state":"running"},{"last_exit":{"code":1},"log":"/l","name":"web","restarts":0,"started_ns":5,"state":"stopped"},{"last_exit":{"signal":9},"log":"","name":"db","restarts":7,"started_ns":6,"state":"restarting"},{"error":"Field \"argv\" is missing","log":"","name":"bad","restarts":0,"started_ns":0,"state":"failed"}]})");
}

TEST(WireGoldenTest, TcpAndIdentity) {
  expectWire(ConnectRequest{8080}, R"({"address":"127.0.0.1","port":8080})");
  expectWire(ConnectRequest{443, "::1"}, R"({"address":"::1","port":443})");
  expectWire(ConnectRequest{22, "localhost"}, R"({"address":"localhost","port":22})");
  expectWire(ParkResult{}, R"({"streams":[]})");
  expectWire(ParkResult{{1, 2, 4294967295}}, R"({"streams":[1,2,4294967295]})");
  expectWire(ResumeRequest{5}, R"({"stream":5})");
  expectWire(Identity{}, R"({})");
  expectWire(
      Identity{"box-1", "0123456789abcdef0123456789abcdef", 1764400000123456789,
               std::string(64, 'a'), true},
      R"({"grow_root":true,"hostname":"box-1","machine_id":"0123456789abcdef0123456789abcdef","seed":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","time_ns":1764400000123456789})");
  expectWire(Identity{"", "", std::nullopt, "", true}, R"({"grow_root":true})");
  expectWire(IdentityResult{}, R"({"root_bytes":0,"root_grown":false})");
  expectWire(IdentityResult{uint64_t{1} << 40, true},
             R"({"root_bytes":1099511627776,"root_grown":true})");
}

TEST(WireGoldenTest, InvalidUtf8IsReplacedOnEncode) {
  const std::string encoded = encodeMessage(ErrorMessage{"internal", "bad \xff byte"});
  EXPECT_EQ(encoded, R"({"code":"internal","message":"bad � byte"})");
}

}  // namespace
}  // namespace hutch::proto
