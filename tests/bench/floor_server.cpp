// The floor of the daemon benchmark: a server that does nothing but answer.
// Listens on 127.0.0.1 (port 0), prints "listening on 127.0.0.1:<port>", and
// on each connection, one thread per connection with blocking calls (the
// cheapest way to answer one request at a time), reads a framed request
// (six hex digits of length, then the payload) and writes back `reply_bytes`
// bytes. bench_daemon runs its clients against it with the daemon's own
// message sizes: the difference is what Passepartout itself costs.
//
//   floor_server REPLY_BYTES
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

bool read_exactly(int fd, char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t got = ::recv(fd, data, size, 0);
    if (got <= 0) return false;
    data += got;
    size -= static_cast<std::size_t>(got);
  }
  return true;
}

void serve(int fd, std::size_t reply_bytes) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const std::string reply(reply_bytes, 'x');
  std::string payload;
  char prefix[7] = {};
  while (read_exactly(fd, prefix, 6)) {
    const std::size_t length = std::strtoul(prefix, nullptr, 16);
    payload.resize(length);
    if (!read_exactly(fd, payload.data(), length)) break;
    if (::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(reply.size())) break;
  }
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: floor_server REPLY_BYTES\n");
    return 2;
  }
  const std::size_t reply_bytes = std::strtoul(argv[1], nullptr, 10);
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener, 256) != 0 || ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    std::perror("floor_server");
    return 1;
  }
  std::printf("listening on 127.0.0.1:%u\n", static_cast<unsigned>(ntohs(address.sin_port)));
  std::fflush(stdout);
  for (;;) {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::thread(serve, fd, reply_bytes).detach();
  }
}
