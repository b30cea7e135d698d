#pragma once
// Wakes the agent's loop the moment a job's shim exits, instead of at its next tick: the shim
// records the job's outcome and then exits, so its exit is when allotd can first be told. One
// pidfd (pidfd_open, Linux 5.3) per running job, waited on by the I/O thread; without pidfds
// the loop's tick still notices every exit, only later.

#include <sys/types.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>

namespace allot::agent {

class ExitWatch {
 public:
  ExitWatch(boost::asio::any_io_executor ex, std::function<void()> wake);
  ~ExitWatch();
  ExitWatch(const ExitWatch&) = delete;
  ExitWatch& operator=(const ExitWatch&) = delete;

  // Watches exactly these processes, by job: new ones are opened, gone ones closed. A pid that
  // exited already (or cannot be opened) wakes at once or not at all; the tick covers both.
  void update(const std::map<int64_t, pid_t>& shims);

 private:
  struct Watch {
    pid_t pid = 0;
    std::unique_ptr<boost::asio::posix::stream_descriptor> fd;
  };
  boost::asio::any_io_executor ex_;
  std::function<void()> wake_;
  std::map<int64_t, Watch> watches_;
  // Shared with the pending waits, which may complete after this watch is gone.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace allot::agent
