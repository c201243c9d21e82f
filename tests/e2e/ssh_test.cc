// SSH into boxes with Debian's own OpenSSH clients (ssh, sftp, scp, rsync, git) through the
// configuration `hutch ssh-config` prints (docs/ssh.md): no key, no sshd in the box.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "harness.h"
#include "tcp_client.h"

namespace hutch::e2e {
namespace {

using namespace std::chrono_literals;

// Writes `hutch ssh-config` (run with `remote`'s flags, if any) to `path`.
void writeConfig(const Daemon& d, const std::filesystem::path& path,
                 const RemoteCli* remote = nullptr) {
  auto config = remote != nullptr ? d.hutchAs(*remote, {"ssh-config"}) : d.hutch({"ssh-config"});
  ASSERT_EQ(config.exit_code, 0) << config.err;
  std::ofstream(path) << config.out;
}

bool boxHas(const Daemon& d, const std::string& box, const std::string& path) {
  return d.hutch({"exec", box, "--", "test", "-x", path}).exit_code == 0;
}

// `bytes` random bytes in `path` (not through shell(): it sends the command's stdout to its own
// file, after any redirection the command makes).
void writeRandom(const std::filesystem::path& path, size_t bytes) {
  std::ifstream random("/dev/urandom", std::ios::binary);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::string chunk(size_t{1} << 20, '\0');
  while (bytes > 0) {
    const size_t n = std::min(bytes, chunk.size());
    random.read(chunk.data(), static_cast<std::streamsize>(n));
    out.write(chunk.data(), static_cast<std::streamsize>(n));
    bytes -= n;
  }
  ASSERT_TRUE(out.good()) << path;
}

class SshTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new Daemon({"--listen-http", "127.0.0.1:0"});
    auto run = daemon_->hutch({"run", "--name", "dev"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    writeConfig(*daemon_, config());
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static std::filesystem::path config() { return daemon_->dir() / "ssh_config"; }
  static std::string sshCommand() { return "ssh -F " + quoted(config().string()); }
  // `ssh -F CONFIG ARGS` through /bin/sh (ARGS as written).
  static CommandResult ssh(const std::string& args, const std::string& env = {}) {
    return shell(env + (env.empty() ? "" : " ") + sshCommand() + " " + args);
  }
  static Daemon* daemon_;
};
Daemon* SshTest::daemon_ = nullptr;

TEST_F(SshTest, ExitStatusStreamsAndStdin) {
  EXPECT_EQ(ssh("dev.hutch true").exit_code, 0);
  EXPECT_EQ(ssh("dev.hutch false").exit_code, 1);
  EXPECT_EQ(ssh("dev.hutch 'exit 7'").exit_code, 7);
  // ssh-proxy takes BOX as well as BOX.hutch (a ProxyCommand of one's own, no block).
  const std::string text = readFile(config());
  const size_t at = text.find("ProxyCommand ") + 13;
  const std::string proxy = text.substr(at, text.find('\n', at) - at);
  std::ofstream(daemon_->dir() / "bare_known_hosts")
      << daemon_->hutch({"ssh-known-hosts", "dev"}).out;
  auto bare = shell("ssh -F /dev/null -o BatchMode=yes -o IdentityAgent=none -o " +
                    quoted("ProxyCommand=" + proxy) + " -o UserKnownHostsFile=" +
                    quoted((daemon_->dir() / "bare_known_hosts").string()) +
                    " -o StrictHostKeyChecking=yes dev 'echo bare; id -un'");
  EXPECT_EQ(bare.out, "bare\nroot\n") << bare.err;
  auto r = ssh("dev.hutch 'echo out; echo err >&2; echo out2'");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "out\nout2\n");
  EXPECT_EQ(r.err, "err\n");
  // The box's default user, in its home, with the login shell from its passwd entry.
  auto who = ssh("dev.hutch 'id -un; pwd; echo $0'");
  EXPECT_EQ(who.out, "hutch\n/home/hutch\n/bin/bash\n") << who.err;
  // Another user by name: the SSH user is the user in the box.
  EXPECT_EQ(ssh("root@dev.hutch 'id -u'").out, "0\n");
  // stdin goes through, with EOF, byte for byte.
  const auto input = daemon_->dir() / "input";
  writeRandom(input, 3000000);
  auto local = shell("sha256sum < " + quoted(input.string()));
  ASSERT_EQ(std::filesystem::file_size(input), 3000000u);
  auto remote = ssh("dev.hutch sha256sum < " + quoted(input.string()));
  EXPECT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_EQ(remote.out, local.out);
  // Output both ways at once, larger than every window on the way.
  auto big = ssh("dev.hutch 'head -c 20000000 /dev/zero' | wc -c");
  EXPECT_EQ(big.out, "20000000\n");
}

TEST_F(SshTest, SshConfigInstallIncludesTheBlockOnce) {
  const auto home = daemon_->dir() / "home";
  std::filesystem::create_directories(home / ".ssh");
  std::ofstream(home / ".ssh" / "config") << "Host other\n  User someone\n";
  const std::string text = readFile(config());
  const size_t at = text.find("ProxyCommand ") + 13;
  // The CLI with its flags, as the block runs it.
  const std::string proxy = text.substr(at, text.find('\n', at) - at);
  const std::string hutch = proxy.substr(0, proxy.find(" ssh-proxy"));
  for (int i = 0; i < 2; ++i) {
    auto install = shell("HOME=" + quoted(home.string()) + " " + hutch + " ssh-config --install");
    ASSERT_EQ(install.exit_code, 0) << install.err;
  }
  EXPECT_EQ(readFile(home / ".ssh" / "hutch_config"), text);
  const std::string include = "Include " + (home / ".ssh" / "hutch_config").string() + "\n";
  EXPECT_EQ(readFile(home / ".ssh" / "config"), include + "\nHost other\n  User someone\n");
  auto through =
      shell("ssh -F " + quoted((home / ".ssh" / "config").string()) + " dev.hutch 'echo included'");
  EXPECT_EQ(through.out, "included\n") << through.err;
}

TEST_F(SshTest, AHundredMegabytesBothWays) {
  const auto& dir = daemon_->dir();
  const std::string file = (dir / "hundred").string();
  writeRandom(file, 100000000);
  const std::string local = shell("sha256sum < " + quoted(file)).out.substr(0, 64);
  auto up = ssh("dev.hutch 'cat > /tmp/hundred && sha256sum < /tmp/hundred' < " + quoted(file));
  ASSERT_EQ(up.exit_code, 0) << up.err;
  EXPECT_EQ(up.out.substr(0, 64), local);
  auto down = ssh("dev.hutch 'cat /tmp/hundred' | sha256sum");
  EXPECT_EQ(down.out.substr(0, 64), local);
  if (boxHas(*daemon_, "dev", "/usr/lib/openssh/sftp-server")) {
    const std::string back = (dir / "hundred-back").string();
    auto scp =
        shell("scp -F " + quoted(config().string()) + " dev.hutch:/tmp/hundred " + quoted(back));
    ASSERT_EQ(scp.exit_code, 0) << scp.err;
    EXPECT_EQ(shell("sha256sum < " + quoted(back)).out.substr(0, 64), local);
  }
  (void)ssh("dev.hutch 'rm -f /tmp/hundred'");
}

TEST_F(SshTest, SignalsAreReportedAsOpenSshReportsThem) {
  // sshd sends exit-signal for a command killed by a signal; OpenSSH's ssh then exits 255
  // without a message (-v shows the request).
  auto killed = ssh("dev.hutch 'kill -TERM $$'");
  EXPECT_EQ(killed.exit_code, 255);
  EXPECT_EQ(killed.err, "");
  auto verbose = ssh("-v dev.hutch 'kill -KILL $$'");
  EXPECT_EQ(verbose.exit_code, 255);
  EXPECT_NE(verbose.err.find("rtype exit-signal"), std::string::npos) << verbose.err;
}

TEST_F(SshTest, PtySessionsHaveATerminalAndShellsTakeCommands) {
  auto tty = ssh("-tt dev.hutch tty < /dev/null");
  EXPECT_EQ(tty.exit_code, 0) << tty.err;
  EXPECT_EQ(tty.out.rfind("/dev/pts/", 0), 0u) << tty.out;
  auto no_tty = ssh("dev.hutch tty");
  EXPECT_EQ(no_tty.exit_code, 1);
  EXPECT_EQ(no_tty.out, "not a tty\n");
  auto term = ssh("-tt dev.hutch 'echo $TERM' < /dev/null", "TERM=xterm-256color");
  EXPECT_NE(term.out.find("xterm-256color"), std::string::npos) << term.out;
  // Only the variables the box allows come through `env` requests.
  auto env =
      ssh("-o SendEnv=LC_HUTCH -o SendEnv=HUTCH_SECRET dev.hutch 'echo $LC_HUTCH/$HUTCH_SECRET'",
          "LC_HUTCH=yes HUTCH_SECRET=no");
  EXPECT_EQ(env.out, "yes/\n") << env.err;
  // A login shell on a terminal, fed by a script through script(1) (a real terminal here).
  auto shell_session = shell("printf 'echo $((6*7))\\nexit 3\\n' | script -qec " +
                             quoted(sshCommand() + " -tt dev.hutch") + " /dev/null");
  EXPECT_EQ(shell_session.exit_code, 3) << shell_session.out << shell_session.err;
  EXPECT_NE(shell_session.out.find("42"), std::string::npos) << shell_session.out;
}

TEST_F(SshTest, HutchSshIsAnInteractiveTerminalThatFollowsTheWindow) {
  // hutch ssh BOX: OpenSSH's ssh on our terminal, with the block in memory.
  PtyCli cli(*daemon_, {"ssh", "dev"}, 24, 80);
  ASSERT_TRUE(cli.write("PS1='ssh$ '; stty size\r"));
  ASSERT_TRUE(cli.waitFor("24 80\r\n")) << cli.output();
  cli.resize(33, 101);  // ssh sends window-change; the box's terminal follows
  ASSERT_TRUE(cli.write("stty size\r"));
  ASSERT_TRUE(cli.waitFor("33 101\r\n")) << cli.output();
  // ^C reaches the foreground job through the box's terminal, not ssh.
  ASSERT_TRUE(cli.write("sleep 100; echo slept $?\r"));
  std::this_thread::sleep_for(1s);
  ASSERT_TRUE(cli.write("\x03"));
  ASSERT_TRUE(cli.waitFor("ssh$ ")) << cli.output();
  ASSERT_TRUE(cli.write("exit 5\r"));
  EXPECT_EQ(cli.wait(), 5) << cli.output();
}

TEST_F(SshTest, SftpPutAndGetKeepEveryByte) {
  if (!boxHas(*daemon_, "dev", "/usr/lib/openssh/sftp-server")) {
    GTEST_SKIP() << "the test image has no /usr/lib/openssh/sftp-server: build the base image "
                    "with openssh-sftp-server (images/base/packages)";
  }
  const auto& dir = daemon_->dir();
  writeRandom(dir / "up", 5000000);
  std::ofstream(dir / "batch") << "put " << (dir / "up").string() << " /tmp/up\n"
                               << "get /tmp/up " << (dir / "down").string() << "\n";
  auto sftp = shell("sftp -F " + quoted(config().string()) + " -b " +
                    quoted((dir / "batch").string()) + " dev.hutch");
  ASSERT_EQ(sftp.exit_code, 0) << sftp.out << sftp.err;
  auto local = shell("sha256sum < " + quoted((dir / "up").string()));
  EXPECT_EQ(shell("sha256sum < " + quoted((dir / "down").string())).out, local.out);
  EXPECT_EQ(ssh("dev.hutch 'sha256sum < /tmp/up'").out, local.out);
}

TEST_F(SshTest, ScpInBothModes) {
  if (!boxHas(*daemon_, "dev", "/usr/lib/openssh/sftp-server") ||
      !boxHas(*daemon_, "dev", "/usr/bin/scp")) {
    GTEST_SKIP() << "the test image lacks sftp-server or scp: build the base image with "
                    "openssh-sftp-server and openssh-client (images/base/packages)";
  }
  const auto& dir = daemon_->dir();
  const std::string file = (dir / "scp-up").string();
  writeRandom(file, 2000000);
  const std::string local = shell("sha256sum < " + quoted(file)).out;
  const std::string scp = "scp -F " + quoted(config().string());
  // The SFTP protocol (scp's default since OpenSSH 9.0), then the legacy one (-O: scp -t/-f).
  for (const std::string mode : {"", "-O"}) {
    const std::string back = (dir / ("scp-down" + mode)).string();
    auto up = shell(scp + " " + mode + " " + quoted(file) + " dev.hutch:/tmp/scp" + mode);
    ASSERT_EQ(up.exit_code, 0) << mode << up.err;
    auto down = shell(scp + " " + mode + " dev.hutch:/tmp/scp" + mode + " " + quoted(back));
    ASSERT_EQ(down.exit_code, 0) << mode << down.err;
    EXPECT_EQ(shell("sha256sum < " + quoted(back)).out, local) << mode;
  }
}

TEST_F(SshTest, RsyncOverSsh) {
  if (!boxHas(*daemon_, "dev", "/usr/bin/rsync")) {
    GTEST_SKIP() << "the test image has no rsync: build the base image with rsync "
                    "(images/base/packages)";
  }
  const auto& dir = daemon_->dir();
  std::filesystem::create_directories(dir / "tree/sub");
  std::ofstream(dir / "tree/a") << "a\n";
  writeRandom(dir / "tree/sub/b", 100000);
  auto rsync = shell("rsync -a -e " + quoted(sshCommand()) + " " +
                     quoted((dir / "tree").string() + "/") + " dev.hutch:/tmp/tree/");
  ASSERT_EQ(rsync.exit_code, 0) << rsync.err;
  EXPECT_EQ(ssh("dev.hutch 'cat /tmp/tree/a; sha256sum < /tmp/tree/sub/b'").out,
            "a\n" + shell("sha256sum < " + quoted((dir / "tree/sub/b").string())).out);
}

TEST_F(SshTest, GitCloneFromABox) {
  const auto& dir = daemon_->dir();
  ASSERT_EQ(ssh("dev.hutch 'git init -q /tmp/repo && cd /tmp/repo && echo hi > f && git add f && "
                "git -c user.email=a@b -c user.name=a commit -qm one'")
                .exit_code,
            0);
  auto clone = shell("GIT_SSH_COMMAND=" + quoted(sshCommand()) +
                     " git clone -q dev.hutch:/tmp/repo " + quoted((dir / "clone").string()));
  ASSERT_EQ(clone.exit_code, 0) << clone.err;
  EXPECT_EQ(readFile(dir / "clone" / "f"), "hi\n");
}

TEST_F(SshTest, LocalForwardReachesAServerInTheBoxAndNothingElse) {
  // What VS Code Remote-SSH does: a script run over ssh starts a server in the background and
  // prints where it listens, then a direct-tcpip channel reaches it (-W: stdin/stdout to
  // host:port through the SSH connection).
  auto started =
      ssh("dev.hutch 'mkdir -p /tmp/www && echo from-the-box > /tmp/www/index.html && "
          "cd /tmp/www && setsid nohup python3 -m http.server 8123 --bind 127.0.0.1 "
          ">/tmp/www.log 2>&1 < /dev/null & echo listening on 8123'");
  ASSERT_EQ(started.exit_code, 0) << started.err;
  EXPECT_EQ(started.out, "listening on 8123\n");
  const std::string get = "printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' | " + sshCommand() +
                          " -W localhost:8123 dev.hutch";
  auto page = shell(get);
  for (int i = 0; i < 30 && page.out.find("from-the-box") == std::string::npos; ++i) {
    std::this_thread::sleep_for(1s);  // the server may still be starting
    page = shell(get);
  }
  EXPECT_NE(page.out.find("from-the-box"), std::string::npos) << page.err;
  // ssh -L, then an ordinary HTTP client on the host.
  auto forward = shell(sshCommand() +
                       " -N -L 127.0.0.1:18923:127.0.0.1:8123 dev.hutch >/dev/null 2>&1 & echo $!");
  ASSERT_EQ(forward.exit_code, 0);
  auto curl = shell(
      "curl -sf --retry 30 --retry-connrefused --retry-delay 1 "
      "http://127.0.0.1:18923/index.html");
  EXPECT_EQ(curl.out, "from-the-box\n") << curl.err;
  ::kill(std::stoi(forward.out), SIGTERM);
  // Anywhere else is refused: SSH reaches into the box, not through it.
  auto out = ssh("-W example.com:80 dev.hutch < /dev/null");
  EXPECT_EQ(out.exit_code, 255);
  EXPECT_NE(out.err.find("administratively prohibited"), std::string::npos) << out.err;
  auto remote_forward =
      ssh("-o ExitOnForwardFailure=yes -R 127.0.0.1:9999:localhost:22 dev.hutch true < /dev/null");
  EXPECT_EQ(remote_forward.exit_code, 255);
  EXPECT_NE(remote_forward.err.find("remote port forwarding failed"), std::string::npos)
      << remote_forward.err;
}

TEST_F(SshTest, ConnectingWakesAStoppedBox) {
  ASSERT_EQ(daemon_->hutch({"run", "--name", "sleepy"}).exit_code, 0);
  ASSERT_EQ(daemon_->hutch({"stop", "sleepy"}).exit_code, 0);  // suspended
  EXPECT_EQ(daemon_->inspect("sleepy")["state"], "suspended");
  EXPECT_EQ(ssh("sleepy.hutch 'echo up'").out, "up\n");
  EXPECT_EQ(daemon_->inspect("sleepy")["state"], "running");
  ASSERT_EQ(daemon_->hutch({"stop", "--shutdown", "sleepy"}).exit_code, 0);
  EXPECT_EQ(daemon_->inspect("sleepy")["state"], "stopped");
  EXPECT_EQ(ssh("sleepy.hutch 'echo up again'").out, "up again\n");
  EXPECT_EQ(daemon_->inspect("sleepy")["state"], "running");
  // The session and its commands are in the events and the audit log.
  auto events = daemon_->hutch({"events", "--box", "sleepy", "--json"}).out;
  EXPECT_NE(events.find("\"ssh.session.started\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"ssh.session.ended\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"exec.started\""), std::string::npos) << events;
  auto audit = daemon_->hutch({"audit", "--box", "sleepy"});
  EXPECT_NE(audit.out.find("ssh.session.start"), std::string::npos) << audit.out;
}

TEST_F(SshTest, AnotherOwnersBoxIsRefusedLikeAMissingOne) {
  auto ends = endpointsOf(*daemon_);
  RemoteCli alice{{"--host", ends.http}, makeKey(*daemon_, {"alice"})};
  RemoteCli bob{{"--host", ends.http}, makeKey(*daemon_, {"bob"})};
  ASSERT_EQ(daemon_->hutchAs(alice, {"run", "--name", "alices"}).exit_code, 0);
  const auto alice_config = daemon_->dir() / "alice_config";
  const auto bob_config = daemon_->dir() / "bob_config";
  writeConfig(*daemon_, alice_config, &alice);
  writeConfig(*daemon_, bob_config, &bob);
  auto as = [](const RemoteCli& who, const std::filesystem::path& cfg, const std::string& args) {
    return shell("HUTCH_API_KEY=" + quoted(who.api_key) + " ssh -F " + quoted(cfg.string()) + " " +
                 args);
  };
  EXPECT_EQ(as(alice, alice_config, "alices.hutch 'echo mine'").out, "mine\n");
  auto theirs = as(bob, bob_config, "alices.hutch true");
  auto missing = as(bob, bob_config, "nosuchbox.hutch true");
  EXPECT_EQ(theirs.exit_code, 255);
  EXPECT_EQ(missing.exit_code, 255);
  EXPECT_NE(theirs.err.find("No such box"), std::string::npos) << theirs.err;
  // The same words, but for the name.
  std::string told = theirs.err;
  for (size_t at; (at = told.find("alices")) != std::string::npos;)
    told.replace(at, 6, "nosuchbox");
  EXPECT_EQ(told, missing.err);
  // And the host administrator's unix socket sees every box.
  EXPECT_EQ(ssh("alices.hutch 'echo admin'").out, "admin\n");
}

TEST_F(SshTest, TheHostKeyIsKeptAcrossARestartAndAFork) {
  auto before = daemon_->hutch({"ssh-known-hosts", "dev.hutch"});
  ASSERT_EQ(before.exit_code, 0) << before.err;
  EXPECT_EQ(before.out.rfind("dev.hutch ssh-ed25519 AAAA", 0), 0u) << before.out;
  daemon_->crashAndRestart();
  EXPECT_EQ(daemon_->hutch({"ssh-known-hosts", "dev.hutch"}).out, before.out);
  // StrictHostKeyChecking yes: the fork answers with the key ssh was given for any *.hutch.
  auto fork = daemon_->hutch({"fork", "dev", "--json"});
  ASSERT_EQ(fork.exit_code, 0) << fork.err;
  auto children = nlohmann::json::parse(fork.out);
  ASSERT_EQ(children.size(), 1u);
  const std::string child = children[0]["name"];
  EXPECT_EQ(ssh(child + ".hutch hostname").out, child + "\n");
  EXPECT_EQ(daemon_->hutch({"ssh-known-hosts", child + ".hutch"}).out,
            child + before.out.substr(3));
}

TEST(SshIdleTest, AnOpenSessionKeepsTheBoxAwake) {
  Daemon d({"--idle-pause", "2"});
  ASSERT_EQ(d.hutch({"run", "--name", "held"}).exit_code, 0);
  writeConfig(d, d.dir() / "ssh_config");
  // ssh -N: a connection with no command at all, as an IDE keeps between its commands.
  auto started = shell("ssh -F " + quoted((d.dir() / "ssh_config").string()) +
                       " -N held.hutch >/dev/null 2>&1 & echo $!");
  ASSERT_EQ(started.exit_code, 0);
  EXPECT_TRUE(eventually([&] {
    return d.hutch({"events", "--box", "held", "--json"}).out.find("ssh.session.started") !=
           std::string::npos;
  }));
  // Far longer than the idle period, with an idle check every second.
  std::this_thread::sleep_for(8s);
  EXPECT_EQ(d.inspect("held")["state"], "running");
  const pid_t ssh = std::stoi(started.out);
  ::kill(ssh, SIGTERM);
  // Once the session ended, the box pauses as any idle box does; the next connection wakes it.
  EXPECT_EQ(d.waitForState("held", "paused")["state"], "paused");
  auto woken =
      shell("ssh -F " + quoted((d.dir() / "ssh_config").string()) + " held.hutch 'echo awake'");
  EXPECT_EQ(woken.out, "awake\n") << woken.err;
}

TEST(SshGatewayTest, RegisteredKeysReachTheirOwnersBoxesOnly) {
  const uint16_t port = freePort();
  Daemon d({"--listen-http", "127.0.0.1:0", "--listen-ssh", fmt::format("127.0.0.1:{}", port)});
  auto ends = endpointsOf(d);
  RemoteCli alice{{"--host", ends.http}, makeKey(d, {"alice"})};
  RemoteCli bob{{"--host", ends.http}, makeKey(d, {"bob"})};
  ASSERT_EQ(d.hutchAs(alice, {"run", "--name", "abox"}).exit_code, 0);
  ASSERT_EQ(d.hutchAs(bob, {"run", "--name", "bbox"}).exit_code, 0);
  const auto& dir = d.dir();
  for (const char* who : {"alice", "bob", "stranger"}) {
    ASSERT_EQ(shell("ssh-keygen -q -t ed25519 -N '' -f " + quoted((dir / who).string())).exit_code,
              0);
  }
  auto added = d.hutchAs(alice, {"key", "ssh", "add", "laptop", (dir / "alice.pub").string()});
  ASSERT_EQ(added.exit_code, 0) << added.err;
  ASSERT_EQ(d.hutchAs(bob, {"key", "ssh", "add", "laptop", (dir / "bob.pub").string()}).exit_code,
            0);
  // Each owner sees only its own keys; a key belongs to one owner.
  auto listed = d.hutchAs(alice, {"key", "ssh", "ls"});
  EXPECT_NE(listed.out.find(added.out.substr(added.out.find(' ') + 1, 20)), std::string::npos)
      << listed.out;
  EXPECT_EQ(d.hutchAs(bob, {"key", "ssh", "add", "again", (dir / "alice.pub").string()}).exit_code,
            73)
      << "already registered";
  // The host key, checked, for [127.0.0.1]:PORT.
  auto host_key = d.hutch({"ssh-known-hosts", fmt::format("[127.0.0.1]:{}", port)});
  std::ofstream(dir / "known_hosts") << host_key.out;
  auto as = [&](const char* key, const std::string& user, const std::string& command) {
    return shell(fmt::format(
        "ssh -F /dev/null -p {} -i {} -o IdentitiesOnly=yes -o IdentityAgent=none "
        "-o BatchMode=yes -o UserKnownHostsFile={} -o StrictHostKeyChecking=yes {}@127.0.0.1 {} "
        "< /dev/null",
        port, quoted((dir / key).string()), quoted((dir / "known_hosts").string()), user,
        quoted(command)));
  };
  auto mine = as("alice", "abox", "echo hello from $(hostname)");
  EXPECT_EQ(mine.exit_code, 0) << mine.err;
  EXPECT_EQ(mine.out, "hello from abox\n");
  EXPECT_EQ(as("alice", "abox.hutch", "true").exit_code, 0);
  // A stranger's key, another owner's box and a box that does not exist: the same refusal.
  auto stranger = as("stranger", "abox", "true");
  auto theirs = as("bob", "abox", "true");
  auto missing = as("bob", "nosuchbox", "true");
  for (const auto* r : {&stranger, &theirs, &missing}) {
    EXPECT_EQ(r->exit_code, 255);
    EXPECT_NE(r->err.find("Permission denied (publickey)"), std::string::npos) << r->err;
  }
  std::string told = theirs.err;
  for (size_t at; (at = told.find("abox")) != std::string::npos;) told.replace(at, 4, "nosuchbox");
  EXPECT_EQ(told, missing.err);
  EXPECT_EQ(as("bob", "bbox", "echo ok").out, "ok\n");
  // No passwords, ever.
  auto password = shell(
      fmt::format("ssh -F /dev/null -p {} -o BatchMode=yes -o PreferredAuthentications=password "
                  "-o UserKnownHostsFile={} abox@127.0.0.1 true < /dev/null",
                  port, quoted((dir / "known_hosts").string())));
  EXPECT_EQ(password.exit_code, 255);
  EXPECT_NE(password.err.find("Permission denied (publickey)"), std::string::npos) << password.err;
  // A removed key no longer logs in.
  ASSERT_EQ(d.hutchAs(alice, {"key", "ssh", "rm", "laptop"}).exit_code, 0);
  EXPECT_EQ(as("alice", "abox", "true").exit_code, 255);
  // Removing an API key ends the gateway sessions of its SSH keys at once.
  const auto ended = dir / "bob-ended";
  ASSERT_EQ(shell(fmt::format("(ssh -F /dev/null -p {} -i {} -o IdentitiesOnly=yes -o "
                              "IdentityAgent=none -o BatchMode=yes -o UserKnownHostsFile={} "
                              "bbox@127.0.0.1 'echo in; sleep 600' < /dev/null > {}; "
                              "echo $? >> {}) >/dev/null 2>&1 &",
                              port, quoted((dir / "bob").string()),
                              quoted((dir / "known_hosts").string()), quoted(ended.string()),
                              quoted(ended.string())))
                .exit_code,
            0);
  ASSERT_TRUE(eventually([&] { return readFile(ended).starts_with("in\n"); }));
  ASSERT_EQ(d.hutch({"key", "rm", "bob"}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return readFile(ended) == "in\n255\n"; })) << readFile(ended);
}

}  // namespace
}  // namespace hutch::e2e
