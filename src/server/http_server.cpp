#include "server/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "server/errors.h"
#include "server/limits.h"
#include "server/request_head.h"

namespace sluice::server {
namespace {

int to_ms(time_t sec, time_t usec) { return static_cast<int>(sec * 1000 + usec / 1000); }

bool poll_for(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

void address_of(const sockaddr_storage& addr, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    port = ntohs(a->sin6_port);
  }
  ip = buf;
}

// cpp-httplib's Stream over one connected socket, as its own SocketStream
// behaves (that class is not in the Debian header): reads wait up to the read
// timeout and are buffered (the header parser reads byte by byte), writes
// wait up to the write timeout and fail once the peer has gone, which is how
// a streamed generation learns that its client left.
class SocketStream final : public httplib::Stream {
 public:
  SocketStream(int fd, int read_timeout_ms, int write_timeout_ms)
      : fd_(fd), read_ms_(read_timeout_ms), write_ms_(write_timeout_ms) {}

  bool is_readable() const override { return poll_for(fd_, POLLIN, read_ms_); }

  bool is_writable() const override { return poll_for(fd_, POLLOUT, write_ms_) && peer_alive(); }

  ssize_t read(char* ptr, size_t size) override {
    if (off_ < len_) {
      const size_t n = std::min(size, len_ - off_);
      std::memcpy(ptr, buf_ + off_, n);
      off_ += n;
      return static_cast<ssize_t>(n);
    }
    if (!is_readable()) return -1;
    if (size >= sizeof buf_) return recv_some(ptr, size);
    const ssize_t n = recv_some(buf_, sizeof buf_);
    if (n <= 0) return n;
    len_ = static_cast<size_t>(n);
    off_ = std::min(size, len_);
    std::memcpy(ptr, buf_, off_);
    return static_cast<ssize_t>(off_);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
      address_of(addr, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
      address_of(addr, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  ssize_t recv_some(char* ptr, size_t size) {
    ssize_t n;
    do {
      n = ::recv(fd_, ptr, size, 0);
    } while (n < 0 && errno == EINTR);
    return n;
  }
  // False once the peer has closed or reset: readable with nothing to peek.
  bool peer_alive() const {
    if (!poll_for(fd_, POLLIN, 0)) return true;
    char c;
    return ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  }

  int fd_;
  int read_ms_, write_ms_;
  char buf_[4096];
  size_t off_ = 0, len_ = 0;
};

}  // namespace

bool HttpServer::process_and_close_socket(socket_t sock) {
  const int read_ms = to_ms(read_timeout_sec_, read_timeout_usec_);
  bool ok = false;
  switch (peek_request_head(sock, kMaxHeadBytes, read_ms, [this] { return is_running(); })) {
    case HeadCheck::Fits: {
      SocketStream strm(sock, read_ms, to_ms(write_timeout_sec_, write_timeout_usec_));
      bool connection_closed = false;
      ok = process_request(strm, /*close_connection=*/true, connection_closed, nullptr);
      break;
    }
    case HeadCheck::TooLarge: {
      const std::string body = error_body(
          431, "the request line and headers are over " + std::to_string(kMaxHeadBytes) + " bytes");
      answer_and_close(
          sock,
          "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json\r\n"
          "Content-Length: " +
              std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body,
          read_ms);
      return true;
    }
    case HeadCheck::Gone:
      break;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace sluice::server
