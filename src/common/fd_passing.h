#pragma once
// Sending descriptors over a Unix socket (SCM_RIGHTS) with one message: the agent's shim server
// requests (agent/exec/shim_server.cc) and the SSH bridge's terminal (agent/session/
// ssh_bridge_main.cc). Header-only: the bridge is a small program of its own.

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

namespace allot {

// sendmsg() of `data` carrying `fds` (at most 253, the kernel's limit), retried on EINTR; what
// sendmsg returned (-1 with errno set on failure).
inline ssize_t sendWithDescriptors(int socket, std::string_view data, std::span<const int> fds,
                                   int flags) {
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  iovec iov{const_cast<char*>(data.data()), data.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t sent;
  do {
    sent = ::sendmsg(socket, &msg, flags);
  } while (sent < 0 && errno == EINTR);
  return sent;
}

}  // namespace allot
