#include "ssh/ssh_model.h"

#include <gtest/gtest.h>

#include <csignal>

namespace hutch::ssh {
namespace {

TEST(SshModelTest, BoxHostTakesOffTheSuffix) {
  EXPECT_EQ(parseBoxHost("dev.hutch").value(), "dev");
  EXPECT_EQ(parseBoxHost("dev.HUTCH").value(), "dev");
  EXPECT_EQ(parseBoxHost("dev.hutch.").value(), "dev");
  EXPECT_EQ(parseBoxHost("dev").value(), "dev");
  EXPECT_EQ(parseBoxHost("my-box_2.x").value(), "my-box_2.x");
  EXPECT_EQ(parseBoxHost("3f2a9c").value(), "3f2a9c");
  // Only one suffix comes off; a box may be named "hutch".
  EXPECT_EQ(parseBoxHost("a.hutch.hutch").value(), "a.hutch");
  EXPECT_EQ(parseBoxHost("hutch").value(), "hutch");
}

TEST(SshModelTest, BoxHostRejectsWhatNoBoxIsNamed) {
  for (std::string_view bad : {"", ".hutch", ".", "-x.hutch", ".x", "a b", "a/b.hutch", "a@b",
                               "a:22", "box\n.hutch", "b%ox"}) {
    auto parsed = parseBoxHost(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.error().code(), Errc::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(parseBoxHost(std::string(129, 'a')));
  EXPECT_TRUE(parseBoxHost(std::string(128, 'a')));
  EXPECT_FALSE(parseBoxHost(std::string_view("a\0b", 3)));
}

TEST(SshModelTest, EnvAllowsLocaleAndTerminalOnly) {
  EXPECT_TRUE(envAllowed("LANG", "C.UTF-8"));
  EXPECT_TRUE(envAllowed("LC_ALL", "C"));
  EXPECT_TRUE(envAllowed("LC_CTYPE", "en_US.UTF-8"));
  EXPECT_TRUE(envAllowed("TERM", "xterm-256color"));
  EXPECT_TRUE(envAllowed("COLORTERM", "truecolor"));
  EXPECT_TRUE(envAllowed("LANG", ""));
  for (std::string_view bad : {"PATH", "LD_PRELOAD", "HOME", "AWS_SECRET_ACCESS_KEY", "LC-ALL",
                               "lang", "", "LC_ ALL", "1LC", "TERM=x", "LANGUAGE"}) {
    EXPECT_FALSE(envAllowed(bad, "x")) << bad;
  }
  EXPECT_FALSE(envAllowed("LANG", std::string_view("a\0b", 3)));
}

TEST(SshModelTest, UserNamePicksTheBoxUser) {
  EXPECT_EQ(boxUserOf("_default_").value(), std::nullopt);
  EXPECT_EQ(boxUserOf("").value(), std::nullopt);
  EXPECT_EQ(boxUserOf("root").value(), std::optional<std::string>("root"));
  EXPECT_EQ(boxUserOf("1000").value(), std::optional<std::string>("1000"));
  for (std::string_view bad : {"a b", "a/b", "a:b", "a\tb", "a\nb"}) {
    EXPECT_FALSE(boxUserOf(bad)) << bad;
  }
  EXPECT_FALSE(boxUserOf(std::string(65, 'u')));
}

TEST(SshModelTest, SignalsByRfc4254Name) {
  EXPECT_EQ(signalNumber("TERM"), SIGTERM);
  EXPECT_EQ(signalNumber("INT"), SIGINT);
  EXPECT_EQ(signalNumber("KILL"), SIGKILL);
  EXPECT_EQ(signalNumber("USR2"), SIGUSR2);
  EXPECT_EQ(signalNumber("SIGTERM"), std::nullopt);
  EXPECT_EQ(signalNumber("term"), std::nullopt);
  EXPECT_EQ(signalNumber("WINCH"), std::nullopt);
  EXPECT_EQ(signalName(SIGTERM), "TERM");
  EXPECT_EQ(signalName(SIGKILL), "KILL");
  EXPECT_EQ(signalName(SIGSEGV), "SEGV");
  EXPECT_EQ(signalName(SIGBUS), "BUS@openssh.com");
  EXPECT_EQ(signalName(40), "SIG40@openssh.com");
  for (int s : {SIGABRT, SIGALRM, SIGFPE, SIGHUP, SIGILL, SIGINT, SIGKILL, SIGPIPE, SIGQUIT,
                SIGSEGV, SIGTERM, SIGUSR1, SIGUSR2}) {
    EXPECT_EQ(signalNumber(signalName(s)), s);
  }
}

TEST(SshModelTest, DirectTcpipOnlyInsideTheBox) {
  const std::vector<std::string> names{"dev", "3f2a9c0d"};
  EXPECT_EQ(boxLocalAddress("localhost", names), "127.0.0.1");
  EXPECT_EQ(boxLocalAddress("LocalHost", names), "127.0.0.1");
  EXPECT_EQ(boxLocalAddress("127.0.0.1", names), "127.0.0.1");
  EXPECT_EQ(boxLocalAddress("127.1.2.3", names), "127.1.2.3");
  EXPECT_EQ(boxLocalAddress("::1", names), "::1");
  EXPECT_EQ(boxLocalAddress("dev", names), "127.0.0.1");
  EXPECT_EQ(boxLocalAddress("dev.hutch", names), "127.0.0.1");
  EXPECT_EQ(boxLocalAddress("3f2a9c0d", names), "127.0.0.1");
  for (std::string_view bad :
       {"10.0.0.1", "example.com", "", "127.0.0", "127.0.0.256", "127.0.0.01", "127.0.0.1.5",
        "127.a.0.1", "0.0.0.0", "other", "localhost.evil", "::2", "169.254.169.254",
        // Found by fuzz/ssh_names_fuzz.cc: an overflow in the hand-written parser before.
        "127.\377\377\377*uk&_l0", "127.99999999999.0.1"}) {
    EXPECT_EQ(boxLocalAddress(bad, names), std::nullopt) << bad;
  }
  EXPECT_EQ(boxLocalAddress("", {""}), std::nullopt);
}

TEST(SshModelTest, ExecRunsTheLoginShellWithDashC) {
  auto argv = execArgv("echo hi; exit 7");
  ASSERT_EQ(argv.size(), 5u);
  EXPECT_EQ(argv[0], "/bin/sh");
  EXPECT_EQ(argv[1], "-c");
  EXPECT_NE(argv[2].find("/etc/passwd"), std::string::npos);
  EXPECT_NE(argv[2].find("exec \"$s\" -c \"$1\""), std::string::npos);
  EXPECT_EQ(argv[4], "echo hi; exit 7");
}

TEST(SshModelTest, ConfigBlock) {
  auto text = sshConfigText({.hutch_path = "/usr/bin/hutch", .global_flags = {}});
  ASSERT_TRUE(text) << text.error().describe();
  EXPECT_NE(text->find("Host *.hutch\n"), std::string::npos);
  EXPECT_NE(text->find("  ProxyCommand /usr/bin/hutch ssh-proxy %h\n"), std::string::npos);
  EXPECT_NE(text->find("  KnownHostsCommand /usr/bin/hutch ssh-known-hosts %H\n"),
            std::string::npos);
  EXPECT_NE(text->find("  User _default_\n"), std::string::npos);
  EXPECT_NE(text->find("  StrictHostKeyChecking yes\n"), std::string::npos);
  EXPECT_NE(text->find("  IdentityAgent none\n"), std::string::npos);
  EXPECT_NE(text->find("  PasswordAuthentication no\n"), std::string::npos);
}

TEST(SshModelTest, ConfigBlockQuotesPathsAndFlags) {
  auto text = sshConfigText(
      {.hutch_path = "/opt/my tools/hutch", .global_flags = {"--socket", "/run/100%/h.sock"}});
  ASSERT_TRUE(text) << text.error().describe();
  EXPECT_NE(text->find(
                "  ProxyCommand \"/opt/my tools/hutch\" --socket /run/100%%/h.sock ssh-proxy %h\n"),
            std::string::npos)
      << *text;
  for (std::string bad : {"/a\"b", "/a'b", "/a\\b", "/a\nb"}) {
    EXPECT_FALSE(sshConfigText({.hutch_path = bad, .global_flags = {}})) << bad;
    EXPECT_FALSE(sshConfigText({.hutch_path = "/h", .global_flags = {"--socket", bad}})) << bad;
  }
}

TEST(SshModelTest, IncludeIsAddedOnceAtTheTop) {
  const std::string line = "Include ~/.ssh/hutch_config";
  EXPECT_EQ(withInclude("", line), line + "\n");
  const std::string config = "Host a\n  User b\n";
  const std::string once = withInclude(config, line);
  EXPECT_EQ(once, line + "\n\n" + config);
  EXPECT_EQ(withInclude(once, line), once);
  EXPECT_EQ(withInclude("  " + line + "  \r\nHost x\n", line), "  " + line + "  \r\nHost x\n");
}

TEST(SshModelTest, KnownHostsLine) {
  EXPECT_EQ(knownHostsLine("dev.hutch", "ssh-ed25519 AAAA"), "dev.hutch ssh-ed25519 AAAA");
}

}  // namespace
}  // namespace hutch::ssh
