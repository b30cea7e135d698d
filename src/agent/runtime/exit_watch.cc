#include "agent/runtime/exit_watch.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <utility>

namespace allot::agent {
namespace {

int openPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

}  // namespace

ExitWatch::ExitWatch(boost::asio::any_io_executor ex, std::function<void()> wake)
    : ex_(std::move(ex)), wake_(std::move(wake)) {}

ExitWatch::~ExitWatch() {
  *alive_ = false;
  watches_.clear();  // closing each descriptor cancels its wait
}

void ExitWatch::update(const std::map<int64_t, pid_t>& shims) {
  for (auto it = watches_.begin(); it != watches_.end();) {
    auto want = shims.find(it->first);
    if (want == shims.end() || want->second != it->second.pid)
      it = watches_.erase(it);
    else
      ++it;
  }
  for (const auto& [job, pid] : shims) {
    if (pid <= 0 || watches_.count(job)) continue;
    const int fd = openPidfd(pid);
    if (fd < 0) continue;
    Watch w{pid, std::make_unique<boost::asio::posix::stream_descriptor>(ex_)};
    boost::system::error_code ec;
    w.fd->assign(fd, ec);  // registers it with the reactor; on failure the tick still notices
    if (ec) {
      ::close(fd);
      continue;
    }
    // A pidfd turns readable when its process exits.
    w.fd->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                     [alive = alive_, wake = wake_](const boost::system::error_code& ec) {
                       if (!ec && *alive) wake();
                     });
    watches_.emplace(job, std::move(w));
  }
}

}  // namespace allot::agent
