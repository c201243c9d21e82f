#include "proto/messages.h"

#include <gtest/gtest.h>

#include <string>

namespace hutch::proto {
namespace {

template <class T>
T roundTrip(const T& message) {
  auto decoded = decodeMessage<T>(encodeMessage(message));
  EXPECT_TRUE(decoded) << decoded.error().message();
  return decoded ? *decoded : T{};
}

TEST(MessagesTest, RoundTrips) {
  EXPECT_EQ(roundTrip(Hello{1, "hutchd"}), (Hello{1, "hutchd"}));
  EXPECT_EQ(roundTrip(HelloAck{1, "0.1.0", {"exec", "signal"}}),
            (HelloAck{1, "0.1.0", {"exec", "signal"}}));
  ExecRequest exec{{"ls", "-l", "a b"}, {"A=1", "B="}, "/tmp", "1000", true, false};
  EXPECT_EQ(roundTrip(exec), exec);
  EXPECT_EQ(roundTrip(Started{42}), Started{42});
  EXPECT_EQ(roundTrip(ExitStatus::exited(3)), ExitStatus::exited(3));
  EXPECT_EQ(roundTrip(ExitStatus::signaled(9)), ExitStatus::signaled(9));
  EXPECT_EQ(roundTrip(SignalRequest{15}), SignalRequest{15});
  EXPECT_EQ(roundTrip(ErrorMessage{"not_found", "No such command"}),
            (ErrorMessage{"not_found", "No such command"}));
}

TEST(MessagesTest, WireNamesAreStable) {
  ExecRequest exec{{"true"}, {}, "", "", true, false};
  EXPECT_EQ(encodeMessage(exec), R"({"argv":["true"],"env":[],"stdin":true})");
  EXPECT_EQ(encodeMessage(ExitStatus::exited(0)), R"({"code":0})");
  EXPECT_EQ(encodeMessage(ExitStatus::signaled(9)), R"({"signal":9})");
}

TEST(MessagesTest, ExecDefaultsAndUnknownFieldsAreIgnored) {
  auto r = decodeMessage<ExecRequest>(R"({"argv":["id"],"future":{"x":1}})");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->argv, std::vector<std::string>{"id"});
  EXPECT_TRUE(r->env.empty());
  EXPECT_FALSE(r->pipe_stdin);
  EXPECT_FALSE(r->tty);
  EXPECT_TRUE(r->user.empty());
}

TEST(MessagesTest, MalformedJsonIsAProtocolError) {
  for (const char* bad : {"", "{", "not json", "[1,2]", "\"x\"", "{\"argv\":[\"a\"]", "\xff\xfe"}) {
    auto r = decodeMessage<ExecRequest>(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kProtocol) << bad;
  }
}

TEST(MessagesTest, MissingOrMistypedFieldsAreProtocolErrors) {
  for (const char* bad : {R"({})", R"({"argv":"ls"})", R"({"argv":[1]})",
                          R"({"argv":["ls"],"stdin":"yes"})", R"({"argv":["ls"],"env":{}})"}) {
    auto r = decodeMessage<ExecRequest>(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kProtocol) << bad;
  }
  EXPECT_EQ(decodeMessage<Hello>(R"({"host":"x"})").error().code(), Errc::kProtocol);
  EXPECT_EQ(decodeMessage<Hello>(R"({"version":-1})").error().code(), Errc::kProtocol);
  EXPECT_EQ(decodeMessage<Hello>(R"({"version":1.5})").error().code(), Errc::kProtocol);
  EXPECT_EQ(decodeMessage<HelloAck>(R"({"version":1})").error().code(), Errc::kProtocol);
  EXPECT_EQ(decodeMessage<Started>(R"({"pid":0})").error().code(), Errc::kProtocol);
  EXPECT_EQ(decodeMessage<SignalRequest>(R"({"sig":9})").error().code(), Errc::kProtocol);
  EXPECT_EQ(decodeMessage<ErrorMessage>(R"({"message":"x"})").error().code(), Errc::kProtocol);
}

TEST(MessagesTest, ExitStatusNeedsExactlyOneOfCodeAndSignal) {
  EXPECT_FALSE(decodeMessage<ExitStatus>(R"({})"));
  EXPECT_FALSE(decodeMessage<ExitStatus>(R"({"code":1,"signal":9})"));
  EXPECT_FALSE(decodeMessage<ExitStatus>(R"({"code":256})"));
  EXPECT_TRUE(decodeMessage<ExitStatus>(R"({"code":255})"));
}

TEST(MessagesTest, BadExecValuesAreInvalidArguments) {
  for (const char* bad : {R"({"argv":[]})", R"({"argv":[""]})", R"({"argv":["ls"],"env":["NOEQ"]})",
                          R"({"argv":["ls"],"env":["=x"]})", R"({"argv":["a\u0000b"]})",
                          R"({"argv":["ls"],"cwd":"relative"})"}) {
    auto r = decodeMessage<ExecRequest>(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kInvalidArgument) << bad;
  }
}

TEST(MessagesTest, TtyRequestsCarryTheirSize) {
  ExecRequest tty{{"sh"}, {}, "", "", true, true, 24, 80};
  EXPECT_EQ(roundTrip(tty), tty);
  EXPECT_EQ(encodeMessage(tty),
            R"({"argv":["sh"],"cols":80,"env":[],"rows":24,"stdin":true,"tty":true})");
  auto r = decodeMessage<ExecRequest>(R"({"argv":["sh"],"tty":true})");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(r->tty);
  EXPECT_EQ(r->rows, 0);
  EXPECT_EQ(r->cols, 0);
  for (const char* bad :
       {R"({"argv":["sh"],"tty":true,"rows":65536})", R"({"argv":["sh"],"tty":true,"cols":-1})",
        R"({"argv":["sh"],"tty":true,"rows":"24"})", R"({"argv":["sh"],"tty":1})"}) {
    auto bad_request = decodeMessage<ExecRequest>(bad);
    ASSERT_FALSE(bad_request) << bad;
    EXPECT_EQ(bad_request.error().code(), Errc::kProtocol) << bad;
  }
}

TEST(MessagesTest, LoginShellTakesNoArgv) {
  ExecRequest shell;
  shell.login_shell = true;
  shell.tty = true;
  EXPECT_TRUE(validate(shell));
  EXPECT_EQ(roundTrip(shell), shell);
  EXPECT_EQ(encodeMessage(shell),
            R"({"argv":[],"env":[],"login_shell":true,"stdin":false,"tty":true})");
  shell.argv = {"ls"};
  EXPECT_EQ(validate(shell).error().code(), Errc::kInvalidArgument);
  EXPECT_EQ(decodeMessage<ExecRequest>(R"({"argv":["ls"],"login_shell":true})").error().code(),
            Errc::kInvalidArgument);
  // Without login_shell an empty argv is still refused.
  EXPECT_EQ(decodeMessage<ExecRequest>(R"({"argv":[]})").error().code(), Errc::kInvalidArgument);
}

TEST(MessagesTest, WindowSizeNeedsBothDimensions) {
  EXPECT_EQ(roundTrip(WindowSize{50, 132}), (WindowSize{50, 132}));
  EXPECT_EQ(encodeMessage(WindowSize{24, 80}), R"({"cols":80,"rows":24})");
  for (const char* bad : {R"({})", R"({"rows":24})", R"({"cols":80})", R"({"rows":-1,"cols":80})",
                          R"({"rows":24,"cols":70000})", R"({"rows":1.5,"cols":80})", "[24,80]"}) {
    auto r = decodeMessage<WindowSize>(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kProtocol) << bad;
  }
}

TEST(MessagesTest, InvalidUtf8IsEncodedWithoutThrowing) {
  ExecRequest exec{{"echo", "\xff\xfe"}, {}, "", "", false, false};
  std::string json;
  EXPECT_NO_THROW(json = encodeMessage(exec));
  EXPECT_TRUE(decodeMessage<ExecRequest>(json));
}

TEST(MessagesTest, ErrorMessagesMapToErrc) {
  Error e = ErrorMessage::fromError(Error(Errc::kNotFound, "No such command \"x\"")).toError();
  EXPECT_EQ(e.code(), Errc::kNotFound);
  EXPECT_EQ(e.message(), "No such command \"x\"");
  EXPECT_EQ(ErrorMessage({"brand_new", "m"}).toError().code(), Errc::kInternal);
  EXPECT_EQ(errcFromName("protocol"), Errc::kProtocol);
  EXPECT_EQ(errcFromName("nope"), std::nullopt);
}

TEST(MessagesTest, WindowIsFourLittleEndianBytes) {
  EXPECT_EQ(encodeWindow(0x01020304), std::string("\x04\x03\x02\x01", 4));
  EXPECT_EQ(*decodeWindow(encodeWindow(262144)), 262144u);
  EXPECT_EQ(decodeWindow("abc").error().code(), Errc::kProtocol);
  EXPECT_EQ(decodeWindow("abcde").error().code(), Errc::kProtocol);
}

}  // namespace
}  // namespace hutch::proto
