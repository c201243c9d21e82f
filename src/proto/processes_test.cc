#include "proto/processes.h"

#include <gtest/gtest.h>

namespace hutch::proto {
namespace {

TEST(ProcessesMessageTest, RoundTrips) {
  ProcessInfo running{"0a1b2c3d",
                      42,
                      {"sleep", "9"},
                      "hutch",
                      1700,
                      std::nullopt,
                      "/var/log/hutch/exec/0a1b2c3d.log"};
  ProcessInfo exited = running;
  exited.id = "ffffffff";
  exited.exit = ExitStatus::exited(3);
  ProcessInfo killed = running;
  killed.exit = ExitStatus::signaled(15);
  ProcessList list{{running, exited, killed}};
  auto decoded = decodeMessage<ProcessList>(encodeMessage(list));
  ASSERT_TRUE(decoded) << decoded.error().message();
  EXPECT_EQ(*decoded, list);
  EXPECT_EQ(*decodeMessage<ProcessList>(R"({"processes":[]})"), ProcessList{});
  EXPECT_EQ(encodeMessage(killed),
            R"({"argv":["sleep","9"],"id":"0a1b2c3d","log":"/var/log/hutch/exec/0a1b2c3d.log",)"
            R"("pid":42,"running":false,"signal":15,"started_ns":1700,"user":"hutch"})");
  SignalProcess signal{"0a1b2c3d", 9};
  EXPECT_EQ(*decodeMessage<SignalProcess>(encodeMessage(signal)), signal);
}

TEST(ProcessesMessageTest, MalformedListsAreProtocolErrors) {
  for (const char* bad : {R"({})", R"({"processes":{}})", R"({"processes":[1]})",
                          R"({"processes":[{"id":"a","pid":1,"argv":[]}]})",
                          R"({"processes":[{"id":"a","pid":1,"argv":[],"running":false}]})"}) {
    auto r = decodeMessage<ProcessList>(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kProtocol) << bad;
  }
  EXPECT_EQ(decodeMessage<SignalProcess>(R"({"signal":9})").error().code(), Errc::kProtocol);
}

TEST(ProcessesMessageTest, DetachedExecRequestsAndStarts) {
  ExecRequest detached;
  detached.argv = {"sleep", "1"};
  detached.detach = true;
  EXPECT_EQ(encodeMessage(detached),
            R"({"argv":["sleep","1"],"detach":true,"env":[],"stdin":false})");
  EXPECT_EQ(*decodeMessage<ExecRequest>(encodeMessage(detached)), detached);
  for (auto change :
       {+[](ExecRequest& r) { r.pipe_stdin = true; }, +[](ExecRequest& r) { r.tty = true; },
        +[](ExecRequest& r) {
          r.argv.clear();
          r.login_shell = true;
        }}) {
    ExecRequest bad = detached;
    change(bad);
    EXPECT_EQ(validate(bad).error().code(), Errc::kInvalidArgument);
  }
  Started started{7, "0a1b2c3d", "/var/log/hutch/exec/0a1b2c3d.log"};
  EXPECT_EQ(*decodeMessage<Started>(encodeMessage(started)), started);
  EXPECT_EQ(encodeMessage(Started{7}), R"({"pid":7})");
}

}  // namespace
}  // namespace hutch::proto
