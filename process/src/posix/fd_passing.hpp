// Descriptors passed over a UNIX socket (SCM_RIGHTS), internal. Header-only: the static agenthost-reaper helper uses
// it too.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <span>
#include <string_view>

namespace agenthost::process::detail {

/// The most descriptors one send_with_fds() message carries.
inline constexpr std::size_t max_passed_fds = 8;

/// Sends `data` as one message with `fds` attached (1..max_passed_fds). Returns 0, or the errno of sendmsg (EINVAL for
/// a wrong descriptor count); EINTR is retried, SIGPIPE never raised.
inline int send_with_fds(int sock, std::string_view data, std::span<const int> fds) {
  if (fds.empty() || fds.size() > max_passed_fds) return EINVAL;
  iovec iov{const_cast<char*>(data.data()), data.size()};
  alignas(cmsghdr) char space[CMSG_SPACE(sizeof(int) * max_passed_fds)] = {};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = space;
  mh.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
  cmsghdr* c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  for (;;) {
    if (::sendmsg(sock, &mh, MSG_NOSIGNAL) >= 0) return 0;
    if (errno != EINTR) return errno;
  }
}

}  // namespace agenthost::process::detail
