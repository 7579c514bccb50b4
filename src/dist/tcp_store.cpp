#include "dist/tcp_store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace frugal::dist {
namespace {

constexpr uint32_t kMagic = 0x66727567;  // "frug"

using Clock = std::chrono::steady_clock;

struct Fd {
  int fd = -1;
  ~Fd() { if (fd >= 0) ::close(fd); }
};

int ms_left(Clock::time_point deadline) {
  const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return d > 0 ? static_cast<int>(std::min<int64_t>(d, INT32_MAX)) : 0;
}

std::string where(const std::string& addr, int port) { return addr + ":" + std::to_string(port); }

Status send_all(int fd, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  while (n > 0) {
    const ssize_t k = ::send(fd, b, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return io_error(std::string("tcp store: send: ") + std::strerror(errno));
    b += k;
    n -= static_cast<size_t>(k);
  }
  return Status::ok();
}

Status recv_all(int fd, void* p, size_t n, Clock::time_point deadline) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    pollfd pfd{.fd = fd, .events = POLLIN, .revents = 0};
    const int r = ::poll(&pfd, 1, ms_left(deadline));
    if (r == 0) return io_error("tcp store: timed out waiting for rank 0's data");
    if (r < 0 && errno == EINTR) continue;
    const ssize_t k = ::recv(fd, b, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return io_error("tcp store: rank 0 closed the connection early");
    b += k;
    n -= static_cast<size_t>(k);
  }
  return Status::ok();
}

Result<std::vector<uint8_t>> serve(int port, int world_size, const std::vector<uint8_t>& blob, Clock::time_point deadline) {
  Fd s{::socket(AF_INET, SOCK_STREAM, 0)};
  if (s.fd < 0) return io_error(std::string("tcp store: socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);  // peers on other hosts connect to MASTER_ADDR
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return io_error("tcp store: rank 0 cannot listen on port " + std::to_string(port) + ": " + std::strerror(errno) +
                    " (choose another --master-port / MASTER_PORT)");
  if (::listen(s.fd, world_size) != 0) return io_error(std::string("tcp store: listen: ") + std::strerror(errno));
  const uint32_t header[2] = {kMagic, static_cast<uint32_t>(blob.size())};
  for (int served = 0; served < world_size - 1;) {
    pollfd pfd{.fd = s.fd, .events = POLLIN, .revents = 0};
    const int r = ::poll(&pfd, 1, ms_left(deadline));
    if (r == 0)
      return io_error("tcp store: timed out with " + std::to_string(served) + " of " + std::to_string(world_size - 1) +
                      " peers connected to port " + std::to_string(port));
    if (r < 0) {
      if (errno == EINTR) continue;
      return io_error(std::string("tcp store: poll: ") + std::strerror(errno));
    }
    Fd c{::accept(s.fd, nullptr, nullptr)};
    if (c.fd < 0) continue;
    FRUGAL_RETURN_IF_ERROR(send_all(c.fd, header, sizeof header));
    FRUGAL_RETURN_IF_ERROR(send_all(c.fd, blob.data(), blob.size()));
    ++served;
  }
  return blob;
}

Result<std::vector<uint8_t>> fetch(const std::string& addr, int port, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int rc = ::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0)
    return invalid_argument("tcp store: cannot resolve master address '" + addr + "': " + ::gai_strerror(rc));
  std::string last = "no attempt";
  for (;;) {  // rank 0 may not be listening yet: retry until the deadline
    Fd c{::socket(AF_INET, SOCK_STREAM, 0)};
    if (c.fd >= 0 && ::connect(c.fd, res->ai_addr, res->ai_addrlen) == 0) {
      ::freeaddrinfo(res);
      uint32_t header[2] = {0, 0};
      FRUGAL_RETURN_IF_ERROR(recv_all(c.fd, header, sizeof header, deadline));
      if (header[0] != kMagic || header[1] > (1u << 20))
        return io_error("tcp store: " + where(addr, port) + " is not a frugal rank 0 (bad header)");
      std::vector<uint8_t> blob(header[1]);
      FRUGAL_RETURN_IF_ERROR(recv_all(c.fd, blob.data(), blob.size(), deadline));
      return blob;
    }
    last = std::strerror(errno);
    if (ms_left(deadline) == 0) {
      ::freeaddrinfo(res);
      return io_error("tcp store: cannot reach rank 0 at " + where(addr, port) + ": " + last);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

Result<std::vector<uint8_t>> tcp_store_exchange(const std::string& addr, int port, int rank, int world_size,
                                                const std::vector<uint8_t>& blob, double timeout_s) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    return invalid_argument("tcp store: rank " + std::to_string(rank) + " of world size " + std::to_string(world_size));
  if (port < 1 || port > 65535) return invalid_argument("tcp store: port " + std::to_string(port) + " is not a TCP port");
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  if (world_size == 1) return blob;
  if (rank == 0) return serve(port, world_size, blob, deadline);
  return fetch(addr, port, deadline);
}

}  // namespace frugal::dist
