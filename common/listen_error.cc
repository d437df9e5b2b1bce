#include "common/listen_error.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {
namespace {

// errno of binding a TCP socket to host:port; 0 when it binds, -1 when the host does not
// resolve.
int BindErrno(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.empty() || host == "*" ? nullptr : host.c_str(), port.c_str(), &hints,
                    &found) != 0 ||
      found == nullptr) {
    return -1;
  }
  int error = 0;
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = errno;
  } else {
    const int one = 1;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0) error = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return error;
}

}  // namespace

absl::Status ListenError(std::string_view what_view, std::string_view address_view,
                         std::string_view library_message) {
  const absl::string_view what = ToAbslView(what_view);
  const absl::string_view address = ToAbslView(address_view);
  const size_t colon = address.rfind(':');
  std::string host(colon == absl::string_view::npos ? address : address.substr(0, colon));
  const std::string port(colon == absl::string_view::npos ? "" : address.substr(colon + 1));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port_number = 0;
  const int error =
      absl::SimpleAtoi(port, &port_number) && port_number > 0 ? BindErrno(host, port) : 0;
  switch (error) {
    case EADDRINUSE:
      return absl::UnavailableError(absl::StrCat(
          what, ": ", address,
          " is already in use (another process listens there: find it with `ss -ltnp 'sport = :",
          port, "'`, or choose another address)"));
    case EACCES:
      return absl::PermissionDeniedError(
          absl::StrCat(what, ": no permission to listen on ", address,
                       " (ports below 1024 need CAP_NET_BIND_SERVICE)"));
    case EADDRNOTAVAIL:
    case -1:
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": ", address, " is not an address of this host"));
    case 0:
      return absl::UnavailableError(
          absl::StrCat(what, ": cannot listen on ", address, ": ", ToAbslView(library_message)));
    default:
      return absl::UnavailableError(absl::StrCat(what, ": cannot listen on ", address, ": ",
                                                 std::strerror(error), " (",
                                                 ToAbslView(library_message), ")"));
  }
}

}  // namespace rxfleet::common
