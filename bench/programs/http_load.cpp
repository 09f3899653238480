// A closed-loop HTTP/1.1 load generator for KServe v2 infer requests: N
// keep-alive connections, one thread each, every one sending its next
// request as soon as the previous answer is in. It is the GPU bundle's
// client (bench/gpu/gpu_checks.py): the GPU host has neither perf_analyzer
// nor wrk, and a Python client would measure Python at the request rates a
// GPU serves. Dependency-free (POSIX sockets) so that it travels in the
// bundle as it is.
//   ortserve_http_load --url http://127.0.0.1:8000/v2/models/cnn/infer
//       --body FILE[:HEADER_BYTES] [--body ...] [--body-list FILE]
//       [--concurrency 8] [--duration 5] [--warmup 1]
// A body with HEADER_BYTES is a binary-tensor request (Triton's extension:
// that many bytes of JSON, then the raw tensors) and is sent with
// Inference-Header-Content-Length; one without is JSON. --body-list names a
// file with one FILE[:HEADER_BYTES] per line (relative to the list's folder).
// Connection i sends bodies i, i+1, ... in turn, so a mix is spread over the
// connections. Prints one JSON object: requests answered inside the
// measurement window, throughput, latency percentiles (us), status counts
// and the first failure seen.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_program.h"
#include "server/json/JsonWriter.h"

namespace {

using ortserve::bench::Clock;
using ortserve::bench::Fail;

struct Args {
  std::string host = "127.0.0.1";
  std::string port = "8000";
  std::string path;
  std::vector<std::string> bodies;  // FILE[:HEADER_BYTES]
  int concurrency = 8;
  double duration_s = 5.0;
  double warmup_s = 1.0;
};

// http://HOST:PORT/PATH
void ParseUrl(const std::string& url, Args& args) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) Fail("--url must start with http://, got " + url);
  const size_t slash = url.find('/', scheme.size());
  if (slash == std::string::npos) Fail("--url has no path: " + url);
  const std::string authority = url.substr(scheme.size(), slash - scheme.size());
  const size_t colon = authority.rfind(':');
  args.host = colon == std::string::npos ? authority : authority.substr(0, colon);
  args.port = colon == std::string::npos ? "80" : authority.substr(colon + 1);
  args.path = url.substr(slash);
}

void ReadBodyList(const std::string& list, Args& args) {
  std::ifstream in(list);
  if (!in) Fail("cannot read " + list);
  const std::filesystem::path folder = std::filesystem::path(list).parent_path();
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    args.bodies.push_back(std::filesystem::path(line).is_absolute() ? line : (folder / line).string());
  }
}

Args ParseArgs(int argc, char** argv) {
  Args args;
  ortserve::bench::ParseFlags(argc, argv, {}, [&](const std::string& flag, const std::string& value) {
    if (flag == "--url") ParseUrl(value, args);
    else if (flag == "--body") args.bodies.push_back(value);
    else if (flag == "--body-list") ReadBodyList(value, args);
    else if (flag == "--concurrency") args.concurrency = std::stoi(value);
    else if (flag == "--duration") args.duration_s = std::stod(value);
    else if (flag == "--warmup") args.warmup_s = std::stod(value);
    else Fail("unknown flag " + flag);
  });
  if (args.path.empty() || args.bodies.empty()) Fail("--url and at least one --body are required");
  if (args.concurrency < 1) Fail("--concurrency must be at least 1");
  ortserve::bench::CheckWindow(args.duration_s, args.warmup_s);
  return args;
}

// The whole request (head and body) for one FILE[:HEADER_BYTES].
std::string BuildRequest(const Args& args, const std::string& spec) {
  const size_t colon = spec.rfind(':');
  const bool binary = colon != std::string::npos && colon + 1 < spec.size() &&
                      spec.find_first_not_of("0123456789", colon + 1) == std::string::npos;
  const std::vector<std::byte> body = ortserve::bench::ReadFileBytes(binary ? spec.substr(0, colon) : spec);
  std::string request = "POST " + args.path + " HTTP/1.1\r\nHost: " + args.host + ":" + args.port + "\r\n";
  if (binary) {
    request += "Content-Type: application/octet-stream\r\nInference-Header-Content-Length: " +
               spec.substr(colon + 1) + "\r\n";
  } else {
    request += "Content-Type: application/json\r\n";
  }
  request += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  request.append(reinterpret_cast<const char*>(body.data()), body.size());
  return request;
}

int Connect(const Args& args) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(args.host.c_str(), args.port.c_str(), &hints, &found) != 0 || found == nullptr) return -1;
  int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd >= 0) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

bool SendAll(int fd, const std::string& data) {
  for (size_t sent = 0; sent < data.size();) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Reads one response; returns its status code (0: the connection failed or
// the answer was not HTTP with a Content-Length). `failure` gets the status
// line and the start of the body of an answer other than 200.
int ReadResponse(int fd, std::string& buffer, std::string& failure) {
  buffer.clear();
  size_t head_end = std::string::npos;
  char chunk[65536];
  size_t body_bytes = 0;
  int status = 0;
  while (true) {
    if (head_end == std::string::npos) {
      head_end = buffer.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        if (buffer.compare(0, 9, "HTTP/1.1 ") != 0 && buffer.compare(0, 9, "HTTP/1.0 ") != 0) return 0;
        status = std::atoi(buffer.c_str() + 9);
        std::string head = buffer.substr(0, head_end);
        std::transform(head.begin(), head.end(), head.begin(), [](unsigned char c) { return std::tolower(c); });
        const size_t at = head.find("\r\ncontent-length:");
        if (at == std::string::npos) return 0;
        body_bytes = std::strtoull(head.c_str() + at + 17, nullptr, 10);
      }
    }
    if (head_end != std::string::npos && buffer.size() >= head_end + 4 + body_bytes) break;
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    buffer.append(chunk, static_cast<size_t>(n));
  }
  if (status != 200 && failure.empty()) failure = buffer.substr(0, std::min<size_t>(buffer.size(), 400));
  return status;
}

struct Connection {
  std::vector<double> latency_us;  // answers inside the measurement window
  std::map<int, long> statuses;    // status -> count (0: connection failures)
  std::string failure;
};

void Drive(const Args& args, const std::vector<std::string>& requests, int index, Clock::time_point measure_from,
           Clock::time_point until, Connection& out) {
  int fd = -1;
  std::string buffer;
  for (size_t next = index; Clock::now() < until; ++next) {
    if (fd < 0 && (fd = Connect(args)) < 0) {
      ++out.statuses[0];
      if (out.failure.empty()) out.failure = "cannot connect to " + args.host + ":" + args.port;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    const Clock::time_point sent = Clock::now();
    const bool ok = SendAll(fd, requests[next % requests.size()]);
    const int status = ok ? ReadResponse(fd, buffer, out.failure) : 0;
    const Clock::time_point answered = Clock::now();
    if (status == 0) {
      close(fd);
      fd = -1;
      if (out.failure.empty()) out.failure = "connection closed or answer not understood";
    }
    if (answered >= measure_from && answered < until) {
      ++out.statuses[status];
      if (status == 200) out.latency_us.push_back(std::chrono::duration<double, std::micro>(answered - sent).count());
    }
  }
  if (fd >= 0) close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  ortserve::bench::ProgramName() = "ortserve_http_load";
  const Args args = ParseArgs(argc, argv);
  std::vector<std::string> requests;
  for (const std::string& spec : args.bodies) requests.push_back(BuildRequest(args, spec));

  std::vector<Connection> connections(args.concurrency);
  const Clock::time_point start = Clock::now();
  const Clock::time_point measure_from = start + ortserve::bench::Seconds(args.warmup_s);
  const Clock::time_point until = measure_from + ortserve::bench::Seconds(args.duration_s);
  std::vector<std::thread> threads;
  for (int i = 0; i < args.concurrency; ++i)
    threads.emplace_back(Drive, std::cref(args), std::cref(requests), i, measure_from, until, std::ref(connections[i]));
  for (auto& t : threads) t.join();

  std::vector<double> latency_us;
  std::map<int, long> statuses;
  std::string failure;
  for (const Connection& c : connections) {
    latency_us.insert(latency_us.end(), c.latency_us.begin(), c.latency_us.end());
    for (const auto& [status, count] : c.statuses) statuses[status] += count;
    if (failure.empty()) failure = c.failure;
  }
  std::sort(latency_us.begin(), latency_us.end());
  double total_us = 0;
  for (double l : latency_us) total_us += l;

  std::string out;
  ortserve::JsonWriter json(&out);
  json.StartObject();
  json.Key("concurrency");
  json.Int(args.concurrency);
  json.Key("duration_s");
  json.Float(args.duration_s);
  json.Key("requests");
  json.Int(latency_us.size());
  json.Key("throughput");
  json.Float(latency_us.size() / args.duration_s);
  ortserve::bench::WritePercentiles(json, "latency_us", latency_us);
  json.Key("mean_us");
  json.Float(latency_us.empty() ? 0.0 : total_us / latency_us.size());
  json.Key("statuses");
  json.StartObject();
  for (const auto& [status, count] : statuses) {
    json.Key(std::to_string(status));
    json.Int(count);
  }
  json.EndObject();
  json.Key("failure");
  json.String(failure);
  json.EndObject();
  std::printf("%s\n", out.c_str());
  return 0;
}
