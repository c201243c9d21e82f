#include "agent/event_loop.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace hutch::agent {
namespace {

struct TestPipe {
  TestPipe() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
    read.reset(fds[0]);
    write.reset(fds[1]);
  }
  UniqueFd read;
  UniqueFd write;
};

TEST(EventLoopTest, TimersFireInOrderAndCancelledOnesDoNot) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop);
  std::vector<std::string> fired;
  (*loop)->addTimer(std::chrono::milliseconds(20), [&] {
    fired.push_back("20");
    (*loop)->stop();
  });
  auto cancelled = (*loop)->addTimer(std::chrono::milliseconds(5), [&] { fired.push_back("x"); });
  (*loop)->addTimer(std::chrono::milliseconds(1), [&] { fired.push_back("1"); });
  (*loop)->cancelTimer(cancelled);
  (*loop)->run();
  EXPECT_EQ(fired, (std::vector<std::string>{"1", "20"}));
}

TEST(EventLoopTest, PostedTasksRunAfterTheRoundsEvents) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop);
  TestPipe pipe;
  std::vector<std::string> order;
  ASSERT_TRUE((*loop)->add(pipe.read.get(), EPOLLIN, [&](uint32_t) {
    char c;
    while (::read(pipe.read.get(), &c, 1) == 1) {
    }
    order.push_back("event");
    (*loop)->post([&] {
      order.push_back("posted");
      (*loop)->post([&] {
        order.push_back("posted-by-posted");
        (*loop)->stop();
      });
    });
  }));
  ASSERT_EQ(::write(pipe.write.get(), "x", 1), 1);
  (*loop)->run();
  EXPECT_EQ(order, (std::vector<std::string>{"event", "posted", "posted-by-posted"}));
}

TEST(EventLoopTest, AHandlerMayRemoveAnotherFdWithAPendingEvent) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop);
  TestPipe a;
  TestPipe b;
  int calls = 0;
  // Whichever runs first removes the other; the other's pending event must be dropped.
  auto handler = [&](int other) {
    return [&, other](uint32_t) {
      ++calls;
      (*loop)->remove(other);
      (*loop)->stop();
    };
  };
  ASSERT_TRUE((*loop)->add(a.read.get(), EPOLLIN, handler(b.read.get())));
  ASSERT_TRUE((*loop)->add(b.read.get(), EPOLLIN, handler(a.read.get())));
  ASSERT_EQ(::write(a.write.get(), "x", 1), 1);
  ASSERT_EQ(::write(b.write.get(), "x", 1), 1);
  (*loop)->run();
  EXPECT_EQ(calls, 1);
}

TEST(EventLoopTest, AHandlerMayRemoveItself) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop);
  TestPipe pipe;
  int calls = 0;
  ASSERT_TRUE((*loop)->add(pipe.read.get(), EPOLLIN, [&, fd = pipe.read.get()](uint32_t) {
    ++calls;
    (*loop)->remove(fd);  // destroys this lambda's registration while it runs
    (*loop)->addTimer(std::chrono::milliseconds(5), [&] { (*loop)->stop(); });
  }));
  ASSERT_EQ(::write(pipe.write.get(), "x", 1), 1);  // stays readable: level-triggered
  (*loop)->run();
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE((*loop)->watching(pipe.read.get()));
}

}  // namespace
}  // namespace hutch::agent
