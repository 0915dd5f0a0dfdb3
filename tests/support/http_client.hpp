// Test support: a blocking HTTP/1.1 client of a loopback port (the metrics
// endpoint), one connection kept alive across requests, reads bounded in time.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "support/loopback.hpp"

namespace passepartout::testing {

struct HttpReply {
  int status = 0;       // 0: no complete response (refused, closed, timed out)
  std::string headers;  // the status and header lines as received
  std::string body;
  // The value of header `name` (given in lower case; matched in any case), "" when absent.
  std::string header(std::string_view name) const {
    std::string lower = headers;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::string key = "\n" + std::string(name) + ":";
    const std::size_t at = lower.find(key);
    if (at == std::string::npos) return {};
    std::size_t begin = at + key.size();
    while (begin < headers.size() && headers[begin] == ' ') ++begin;
    const std::size_t end = headers.find('\r', begin);
    return headers.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  }
};

class HttpConnection {
 public:
  explicit HttpConnection(std::uint16_t port, std::chrono::seconds timeout = std::chrono::seconds(30))
      : fd_(connect_loopback(port)) {
    if (fd_ < 0) return;
    timeval tv{};
    tv.tv_sec = timeout.count();
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~HttpConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  bool connected() const noexcept { return fd_ >= 0; }

  bool send_raw(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (sent <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(sent));
    }
    return true;
  }

  HttpReply request(std::string_view method, std::string_view path) {
    const std::string text =
        std::string(method) + " " + std::string(path) + " HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: test\r\n\r\n";
    if (!send_raw(text)) return {};
    return read_reply();
  }

  // One response: its head, then Content-Length bytes of body.
  HttpReply read_reply() {
    HttpReply reply;
    std::size_t head_end = std::string::npos;
    while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) return reply;
    }
    const std::string head = buffer_.substr(0, head_end + 2);
    reply.headers = head;
    const std::size_t space = head.find(' ');
    if (space == std::string::npos) return reply;
    const int status = std::atoi(head.c_str() + space + 1);
    const std::string length = reply.header("content-length");
    const std::size_t size = length.empty() ? 0 : std::strtoull(length.c_str(), nullptr, 10);
    while (buffer_.size() < head_end + 4 + size) {
      if (!fill()) return reply;
    }
    reply.body = buffer_.substr(head_end + 4, size);
    buffer_.erase(0, head_end + 4 + size);
    reply.status = status;
    return reply;
  }

  // True when the server closed the connection (reads end) within the timeout.
  // The peer closed the connection: an end of stream, or a reset (a close
  // with unread bytes on its side).
  bool closed_by_peer() {
    char byte = 0;
    const ssize_t got = ::recv(fd_, &byte, 1, 0);
    return got == 0 || (got < 0 && errno == ECONNRESET);
  }

 private:
  bool fill() {
    char chunk[16384];
    const ssize_t got = ::recv(fd_, chunk, sizeof chunk, 0);
    if (got <= 0) return false;
    buffer_.append(chunk, static_cast<std::size_t>(got));
    return true;
  }

  int fd_ = -1;
  std::string buffer_;
};

// One request on a connection of its own.
inline HttpReply http_get(std::uint16_t port, std::string_view path, std::string_view method = "GET") {
  HttpConnection connection(port);
  if (!connection.connected()) return {};
  return connection.request(method, path);
}

}  // namespace passepartout::testing
