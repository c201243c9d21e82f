// The files protocol's rules, driven with raw frames over the agent's --listen socket (the
// well-behaved paths are in src/guest/agent_client_files_test.cc): windows in both directions,
// aborts, session ends, batching of long listings, bad requests.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "agent/testing/agent_process.h"
#include "agent/testing/raw_connection.h"
#include "proto/files.h"
#include "proto/messages.h"
#include "proto/tcp.h"

namespace hutch::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using proto::Frame;
using proto::FrameType;
using testing::AgentProcess;
using testing::RawConnection;

std::vector<std::string> tempFiles(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename();
    if (name.find(".hutch-") != std::string::npos) found.push_back(name);
  }
  return found;
}

bool noTempFilesSoon(const std::string& dir) {
  for (int i = 0; i < 1000; ++i) {
    if (tempFiles(dir).empty()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class ServerFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto agent = AgentProcess::start();
    ASSERT_TRUE(agent) << agent.error().describe();
    agent_ = std::move(*agent);
    dir_ = agent_->dir() + "/files";
    fs::create_directories(dir_);
    auto fd = agent_->connect();
    ASSERT_TRUE(fd) << fd.error().describe();
    conn_ = std::make_unique<RawConnection>(std::move(*fd));
    ASSERT_TRUE(conn_->handshake());
  }

  Frame read(std::chrono::milliseconds timeout = 30s) {
    auto frame = conn_->read(timeout);
    EXPECT_TRUE(frame) << frame.error().describe();
    return frame ? *frame : Frame{FrameType::kError, 0xffffffff, "{}"};
  }

  // The next frame on stream, skipping others (kWindow grants included unless wanted).
  Frame readOn(uint32_t stream, bool skip_windows = true) {
    while (true) {
      Frame frame = read();
      if (frame.stream == 0xffffffff) return frame;
      if (frame.stream != stream) continue;
      if (skip_windows && frame.type == FrameType::kWindow) continue;
      return frame;
    }
  }

  std::string errorCode(const Frame& frame) {
    auto error = proto::decodeMessage<proto::ErrorMessage>(frame.payload);
    return error ? error->code : "(malformed)";
  }

  std::unique_ptr<AgentProcess> agent_;
  std::unique_ptr<RawConnection> conn_;
  std::string dir_;
};

TEST_F(ServerFilesTest, TheCapabilitiesAreAdvertised) {
  ASSERT_TRUE(conn_->send(proto::makeFrame(FrameType::kHello, 0, proto::Hello{1, "test"})));
  Frame ack = read();
  ASSERT_EQ(ack.type, FrameType::kHelloAck);
  auto decoded = proto::decodeMessage<proto::HelloAck>(ack.payload);
  ASSERT_TRUE(decoded);
  EXPECT_TRUE(decoded->hasCapability("files"));
  EXPECT_TRUE(decoded->hasCapability("watch"));
}

TEST_F(ServerFilesTest, AReadStopsAtTheWindowAndGoesOnWithEachGrant) {
  {
    std::ofstream out(dir_ + "/big", std::ios::binary);
    out << std::string(1 << 20, 'b');
  }
  ASSERT_TRUE(conn_->send(
      proto::makeFrame(FrameType::kFileRead, 5, proto::FileReadRequest{dir_ + "/big", ""})));
  Frame opened = readOn(5);
  ASSERT_EQ(opened.type, FrameType::kFileOpened) << opened.payload;
  auto info = proto::decodeMessage<proto::FileInfo>(opened.payload);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->size, 1u << 20);
  size_t got = 0;
  while (got < proto::kInitialWindow) {
    Frame data = readOn(5);
    ASSERT_EQ(data.type, FrameType::kData);
    EXPECT_LE(data.payload.size(), proto::kMaxDataPayload);
    got += data.payload.size();
  }
  EXPECT_EQ(got, proto::kInitialWindow);
  auto nothing = conn_->read(300ms);
  ASSERT_FALSE(nothing);
  EXPECT_EQ(nothing.error().code(), Errc::kTimeout);
  ASSERT_TRUE(conn_->send(Frame{FrameType::kWindow, 5, proto::encodeWindow(100000)}));
  size_t more = 0;
  while (more < 100000) {
    Frame data = readOn(5);
    ASSERT_EQ(data.type, FrameType::kData);
    more += data.payload.size();
  }
  EXPECT_EQ(more, 100000u);
  ASSERT_TRUE(conn_->send(Frame{FrameType::kClose, 5, ""}));
  Frame closed = readOn(5);
  EXPECT_EQ(closed.type, FrameType::kClose);
  // Data sent to a read stream is a protocol error for that stream only.
  ASSERT_TRUE(conn_->send(
      proto::makeFrame(FrameType::kFileRead, 7, proto::FileReadRequest{dir_ + "/big", ""})));
  ASSERT_EQ(readOn(7).type, FrameType::kFileOpened);
  ASSERT_TRUE(conn_->send(Frame{FrameType::kData, 7, "x"}));
  Frame error;
  do {
    error = readOn(7);
  } while (error.type == FrameType::kData);
  ASSERT_EQ(error.type, FrameType::kError);
  EXPECT_EQ(errorCode(error), "protocol");
}

TEST_F(ServerFilesTest, WriteDataBeyondTheWindowIsAStreamErrorAndLeavesNothing) {
  { std::ofstream(dir_ + "/target") << "old"; }
  ASSERT_TRUE(conn_->send(proto::makeFrame(
      FrameType::kFileWrite, 3, proto::FileWriteRequest{dir_ + "/target", "", {}, "", "", true})));
  Frame opened = readOn(3);
  ASSERT_EQ(opened.type, FrameType::kFileOpened) << opened.payload;
  EXPECT_EQ(proto::decodeMessage<proto::FileWriteOpened>(opened.payload)->path, dir_ + "/target");
  ASSERT_TRUE(conn_->send(Frame{FrameType::kData, 3, std::string(proto::kInitialWindow + 1, 'x')}));
  Frame error = readOn(3);
  ASSERT_EQ(error.type, FrameType::kError);
  EXPECT_EQ(errorCode(error), "protocol");
  EXPECT_TRUE(noTempFilesSoon(dir_));
  EXPECT_EQ(readFile(dir_ + "/target"), "old");
  // kWindow is not the host's to send on a write stream; data after kEof neither.
  ASSERT_TRUE(conn_->send(proto::makeFrame(
      FrameType::kFileWrite, 4, proto::FileWriteRequest{dir_ + "/t2", "", {}, "", "", true})));
  ASSERT_EQ(readOn(4).type, FrameType::kFileOpened);
  ASSERT_TRUE(conn_->send(Frame{FrameType::kWindow, 4, proto::encodeWindow(1)}));
  Frame window_error = readOn(4);
  ASSERT_EQ(window_error.type, FrameType::kError);
  EXPECT_EQ(errorCode(window_error), "protocol");
  EXPECT_TRUE(noTempFilesSoon(dir_));
  EXPECT_FALSE(fs::exists(dir_ + "/t2"));
}

TEST_F(ServerFilesTest, AWriteIsGrantedBackAsItIsWrittenAndCommittedAtEof) {
  ASSERT_TRUE(conn_->send(proto::makeFrame(
      FrameType::kFileWrite, 9, proto::FileWriteRequest{dir_ + "/f", "", 0640, "", "", true})));
  // The host may send right away, before kFileOpened: the agent holds it.
  ASSERT_TRUE(conn_->send(Frame{FrameType::kData, 9, std::string(100000, 'a')}));
  ASSERT_EQ(readOn(9).type, FrameType::kFileOpened);
  size_t granted = 0;
  while (granted < 100000) {
    Frame window = readOn(9, /*skip_windows=*/false);
    ASSERT_EQ(window.type, FrameType::kWindow);
    granted += *proto::decodeWindow(window.payload);
  }
  EXPECT_EQ(granted, 100000u);
  EXPECT_FALSE(fs::exists(dir_ + "/f"));  // not before kEof
  ASSERT_TRUE(conn_->send(Frame{FrameType::kEof, 9, ""}));
  Frame result = readOn(9);
  ASSERT_EQ(result.type, FrameType::kResult) << result.payload;
  auto info = proto::decodeMessage<proto::FileInfo>(result.payload);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->size, 100000u);
  EXPECT_EQ(info->mode, 0640u);
  EXPECT_EQ(readFile(dir_ + "/f"), std::string(100000, 'a'));
  EXPECT_TRUE(tempFiles(dir_).empty());
}

TEST_F(ServerFilesTest, ANewSessionRemovesAnUnfinishedWrite) {
  { std::ofstream(dir_ + "/target") << "old"; }
  ASSERT_TRUE(conn_->send(proto::makeFrame(
      FrameType::kFileWrite, 2, proto::FileWriteRequest{dir_ + "/target", "", {}, "", "", true})));
  ASSERT_EQ(readOn(2).type, FrameType::kFileOpened);
  ASSERT_TRUE(conn_->send(Frame{FrameType::kData, 2, std::string(5000, 'n')}));
  ASSERT_EQ(readOn(2, /*skip_windows=*/false).type, FrameType::kWindow);
  EXPECT_EQ(tempFiles(dir_).size(), 1u);
  ASSERT_TRUE(conn_->handshake());  // a new kHello: the old session's streams end
  EXPECT_TRUE(noTempFilesSoon(dir_));
  EXPECT_EQ(readFile(dir_ + "/target"), "old");
  // The same after a disconnect.
  ASSERT_TRUE(conn_->send(proto::makeFrame(
      FrameType::kFileWrite, 2, proto::FileWriteRequest{dir_ + "/target", "", {}, "", "", true})));
  ASSERT_EQ(readOn(2).type, FrameType::kFileOpened);
  conn_->close();
  EXPECT_TRUE(noTempFilesSoon(dir_));
  EXPECT_EQ(readFile(dir_ + "/target"), "old");
}

TEST_F(ServerFilesTest, ALongListingIsSplitIntoFramesThatFitTheLimit) {
  for (int i = 0; i < 3000; ++i) {
    const std::string name = dir_ + "/" + std::to_string(100000 + i) + std::string(200, 'x');
    ::close(::open(name.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
  }
  ASSERT_TRUE(conn_->send(
      proto::makeFrame(FrameType::kFileList, 11, proto::FileListRequest{dir_, "", 1, 10000})));
  size_t entries = 0;
  int parts = 0;
  while (true) {
    Frame frame = readOn(11);
    ASSERT_TRUE(frame.type == FrameType::kFileEntries || frame.type == FrameType::kResult)
        << static_cast<int>(frame.type) << " " << frame.payload.substr(0, 200);
    EXPECT_LT(frame.payload.size(), proto::kMaxPayload);
    auto part = proto::decodeMessage<proto::FileList>(frame.payload);
    ASSERT_TRUE(part) << part.error().message();
    entries += part->entries.size();
    if (frame.type == FrameType::kResult) {
      EXPECT_FALSE(part->truncated);
      break;
    }
    ++parts;
    EXPECT_FALSE(part->truncated);
  }
  EXPECT_EQ(entries, 3000u);
  EXPECT_GE(parts, 2);
}

TEST_F(ServerFilesTest, BadRequestsAreStreamErrorsAndStreamZeroResetsTheSession) {
  ASSERT_TRUE(conn_->send(Frame{FrameType::kFileStat, 1, "{"}));
  Frame malformed = readOn(1);
  ASSERT_EQ(malformed.type, FrameType::kError);
  EXPECT_EQ(errorCode(malformed), "protocol");
  ASSERT_TRUE(conn_->send(Frame{FrameType::kFileList, 2, R"({"path":"/","depth":0})"}));
  Frame bad_depth = readOn(2);
  ASSERT_EQ(bad_depth.type, FrameType::kError);
  EXPECT_EQ(errorCode(bad_depth), "invalid_argument");

  // A stream that is open cannot be opened again; the open one goes on.
  ASSERT_TRUE(
      conn_->send(proto::makeFrame(FrameType::kWatch, 3, proto::WatchRequest{dir_, "", false})));
  ASSERT_EQ(readOn(3).type, FrameType::kFileOpened);
  ASSERT_TRUE(conn_->send(
      proto::makeFrame(FrameType::kFileStat, 3, proto::FileStatRequest{dir_, "", false})));
  Frame duplicate = readOn(3);
  ASSERT_EQ(duplicate.type, FrameType::kError);
  EXPECT_EQ(errorCode(duplicate), "already_exists");
  { std::ofstream(dir_ + "/new") << "x"; }
  Frame events = readOn(3);
  ASSERT_EQ(events.type, FrameType::kFileEvents) << events.payload;
  auto batch = proto::decodeMessage<proto::FileEvents>(events.payload);
  ASSERT_TRUE(batch) << batch.error().message();
  ASSERT_FALSE(batch->events.empty());
  EXPECT_EQ(batch->events[0].type, proto::FileEventType::kCreate);
  EXPECT_EQ(batch->events[0].path, dir_ + "/new");
  ASSERT_TRUE(conn_->send(Frame{FrameType::kClose, 3, ""}));
  Frame closed;
  do {
    closed = readOn(3);  // events still in flight come first
  } while (closed.type == FrameType::kFileEvents);
  EXPECT_EQ(closed.type, FrameType::kClose);

  // On stream 0: a connection error.
  ASSERT_TRUE(conn_->send(
      proto::makeFrame(FrameType::kFileStat, 0, proto::FileStatRequest{dir_, "", false})));
  Frame reset = readOn(0);
  ASSERT_EQ(reset.type, FrameType::kError);
  EXPECT_EQ(errorCode(reset), "protocol");
  // A frame only an agent sends, from the host: the same.
  ASSERT_TRUE(conn_->handshake());
  ASSERT_TRUE(conn_->send(Frame{FrameType::kFileEvents, 4, R"({"events":[]})"}));
  Frame not_hosts = readOn(0);
  ASSERT_EQ(not_hosts.type, FrameType::kError);
  EXPECT_EQ(errorCode(not_hosts), "protocol");
}

}  // namespace
}  // namespace hutch::agent
