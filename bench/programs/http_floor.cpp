// ortserve_http_floor: the transport's floor for a small-request benchmark.
//
// A no-op HTTP/1.1 server: one thread, epoll, keep-alive; it reads each
// request (headers and a Content-Length body) and answers it with the same
// fixed 200 response, whatever the method or path. No parsing beyond the
// framing, no JSON, no model. What a load generator measures against it is
// what the loopback TCP stack and the load generator itself allow on this
// machine: an upper bound for any server answering the same requests with
// the same bytes (bench/run_bench.py runs it on the tiny model's JSON load).
//
//   ortserve_http_floor --port 8000 --body response.json
//
// Benchmark tool only: not hardened, not part of the server.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

namespace {

constexpr size_t kMaxRequestBytes = 1 << 20;  // a request larger than this closes its connection

struct Connection {
  int fd;
  std::string in;  // bytes read and not yet answered
};

// The byte length of the first complete request in `in`, 0 while it is
// incomplete, or npos for one this server will not read (too large, bad
// Content-Length).
size_t CompleteRequestBytes(std::string_view in) {
  const size_t head_end = in.find("\r\n\r\n");
  if (head_end == std::string_view::npos) return in.size() > kMaxRequestBytes ? std::string_view::npos : 0;
  size_t body = 0;
  const std::string_view head = in.substr(0, head_end);
  for (size_t pos = 0; pos < head.size();) {
    size_t eol = head.find("\r\n", pos);
    if (eol == std::string_view::npos) eol = head.size();
    const std::string_view line = head.substr(pos, eol - pos);
    constexpr std::string_view kName = "content-length:";
    if (line.size() > kName.size() && strncasecmp(line.data(), kName.data(), kName.size()) == 0) {
      char* end = nullptr;
      const std::string value(line.substr(kName.size()));
      body = std::strtoull(value.c_str(), &end, 10);
      if (end == value.c_str() || body > kMaxRequestBytes) return std::string_view::npos;
    }
    pos = eol + 2;
  }
  const size_t total = head_end + 4 + body;
  return in.size() >= total ? total : 0;
}

int Usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s --port N --body FILE [--address 127.0.0.1]\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string address = "127.0.0.1", body_path;
  int port = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (flag == "--port") port = std::atoi(argv[i + 1]);
    else if (flag == "--body") body_path = argv[i + 1];
    else if (flag == "--address") address = argv[i + 1];
    else return Usage(argv[0]);
  }
  if (argc % 2 == 0 || port < 0 || port > 65535 || body_path.empty()) return Usage(argv[0]);
  std::ifstream body_file(body_path, std::ios::binary);
  if (!body_file) {
    std::fprintf(stderr, "cannot read %s\n", body_path.c_str());
    return 2;
  }
  const std::string body((std::istreambuf_iterator<char>(body_file)), std::istreambuf_iterator<char>());
  const std::string response = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                               std::to_string(body.size()) + "\r\n\r\n" + body;

  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  const int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) return Usage(argv[0]);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(listener, 1024) != 0) {
    std::fprintf(stderr, "cannot listen on %s:%d: %s\n", address.c_str(), port, std::strerror(errno));
    return 1;
  }
  const int ep = epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the listener
  epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
  std::fprintf(stderr, "ortserve_http_floor: listening on %s:%d, %zu-byte response\n", address.c_str(), port,
               response.size());

  const auto close_connection = [](Connection* c) {
    close(c->fd);  // also leaves the epoll set
    delete c;
  };
  epoll_event events[256];
  char chunk[65536];
  for (;;) {
    const int n = epoll_wait(ep, events, 256, -1);
    if (n < 0 && errno != EINTR) return 1;
    for (int i = 0; i < n; ++i) {
      auto* c = static_cast<Connection*>(events[i].data.ptr);
      if (c == nullptr) {
        for (int fd; (fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK)) >= 0;) {
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          epoll_event cev{};
          cev.events = EPOLLIN;
          cev.data.ptr = new Connection{fd, {}};
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
        }
        continue;
      }
      const ssize_t got = recv(c->fd, chunk, sizeof chunk, 0);
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (got <= 0) {
        close_connection(c);
        continue;
      }
      c->in.append(chunk, static_cast<size_t>(got));
      // Answer every complete request read (one, unless the client pipelines).
      size_t bytes;
      while ((bytes = CompleteRequestBytes(c->in)) != 0 && bytes != std::string_view::npos) {
        if (send(c->fd, response.data(), response.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(response.size())) {
          bytes = std::string_view::npos;  // a client too slow to take one small response: drop it
          break;
        }
        c->in.erase(0, bytes);
      }
      if (bytes == std::string_view::npos) close_connection(c);
    }
  }
}
