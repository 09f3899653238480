// HttpServer over real loopback sockets: keep-alive and pipelining, limits,
// idle timeout, and cancellation of an in-flight request when the client leaves.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "fakes/FakeModel.h"
#include "fakes/FakeRepository.h"
#include "server/http/HttpServer.h"

namespace ortserve {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using ::testing::HasSubstr;
using ::testing::Not;

// "m": echoes its inputs from a thread of its own per request, or holds them.
struct Repo : FakeRepository {
  Repo() { Add(model); }
  std::shared_ptr<FakeModel> model = std::make_shared<FakeModel>(FakeModel::Options{
      .name = "m", .on = FakeModel::AnswerThread::kOwnThread, .stats_max_batch_size = 1});
};

constexpr const char* kInfer = R"({"inputs":[{"name":"x","datatype":"INT32","shape":[2],"data":[1,2]}]})";

std::string InferRequest(bool close = false) {
  return std::string("POST /v2/models/m/infer HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n") +
         (close ? "Connection: close\r\n" : "") + "Content-Length: " + std::to_string(strlen(kInfer)) + "\r\n\r\n" +
         kInfer;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartWith(); }
  // (Re)starts the server with the fixture's options as `tweak` changes them.
  void StartWith(const std::function<void(HttpServerOptions&)>& tweak = {}) {
    if (server) server->Stop();
    HttpServerOptions o;
    o.address = "127.0.0.1";
    o.port = 0;
    o.io_threads = 2;
    o.max_input_size = 4096;
    o.max_header_bytes = 2048;
    o.max_body_chunks = 4;
    o.idle_timeout = std::chrono::seconds(1);
    o.read_timeout = std::chrono::seconds(1);
    o.server_version = "test";
    if (tweak) tweak(o);
    auto s = HttpServer::Create(o, &repo);
    ASSERT_TRUE(s.ok()) << s.status().message();
    server = std::move(s.value());
    ASSERT_TRUE(server->Start().ok());
    ASSERT_NE(server->port(), 0);
  }
  void TearDown() override {
    if (server) server->Stop();
  }
  tcp::socket Connect() {
    tcp::socket s(ctx);
    s.connect({net::ip::make_address("127.0.0.1"), server->port()});
    return s;
  }
  // Reads until the peer closes or `n` responses' worth of "HTTP/1.1 " starts
  // and their bodies have arrived (small responses only).
  static std::string ReadAll(tcp::socket& s) {
    std::string out;
    char buf[4096];
    boost::system::error_code ec;
    while (true) {
      size_t n = s.read_some(net::buffer(buf), ec);
      if (ec) break;
      out.append(buf, n);
    }
    return out;
  }

  Repo repo;
  net::io_context ctx;
  std::unique_ptr<HttpServer> server;
};

TEST_F(HttpServerTest, PipelinedRequestsAnswerInOrderOnOneConnection) {
  auto s = Connect();
  const std::string reqs = "GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n" + InferRequest() +
                           "GET /v2/nope HTTP/1.1\r\nHost: t\r\n\r\n" + InferRequest(/*close=*/true);
  net::write(s, net::buffer(reqs));
  const std::string all = ReadAll(s);
  const size_t a = all.find("HTTP/1.1 200");
  const size_t b = all.find(R"("data":[1,2])");
  const size_t c = all.find("HTTP/1.1 404");
  const size_t d = all.find(R"("data":[1,2])", c == std::string::npos ? 0 : c);
  ASSERT_NE(a, std::string::npos) << all;
  ASSERT_NE(b, std::string::npos) << all;
  ASSERT_NE(c, std::string::npos) << all;
  ASSERT_NE(d, std::string::npos) << all;
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_LT(c, d);
}

TEST_F(HttpServerTest, RequestArrivingInPiecesIsAnswered) {
  // Cut inside the request line, inside the headers, at the end of the
  // headers and inside the body: each piece is parsed as it comes.
  const std::string req = InferRequest(/*close=*/true);
  const size_t header_end = req.find("\r\n\r\n") + 4;
  const std::vector<size_t> cuts = {5, 40, header_end, header_end + 7, req.size()};
  auto s = Connect();
  size_t from = 0;
  for (size_t cut : cuts) {
    net::write(s, net::buffer(req.data() + from, cut - from));
    from = cut;
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  EXPECT_THAT(ReadAll(s), HasSubstr(R"("data":[1,2])"));
}

TEST_F(HttpServerTest, ExpectContinueIsAnsweredBeforeTheBodyIsSent) {
  const std::string req = InferRequest(/*close=*/true);
  const size_t header_end = req.find("\r\n\r\n") + 2;
  auto s = Connect();
  net::write(s, net::buffer(req.substr(0, header_end) + "Expect: 100-continue\r\n\r\n"));
  std::string interim;
  char buf[256];
  while (interim.find("\r\n\r\n") == std::string::npos) interim.append(buf, s.read_some(net::buffer(buf)));
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  net::write(s, net::buffer(req.substr(header_end + 2)));
  const std::string all = ReadAll(s);
  EXPECT_THAT(all, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(all, HasSubstr(R"("data":[1,2])"));
}

// As Triton: 400, in the words its clients match for the kind of body.
TEST_F(HttpServerTest, BodyOverTheLimitIs400InTritonsWords) {
  auto s = Connect();
  net::write(s, net::buffer(std::string("POST /v2/models/m/infer HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n")));
  const std::string all = ReadAll(s);
  EXPECT_THAT(all, HasSubstr("HTTP/1.1 400"));
  EXPECT_THAT(all, HasSubstr("request JSON size of 5000 bytes exceeds the maximum allowed input size of 4096 bytes. "
                             "Use --http-max-input-size to increase the limit."));

  auto raw = Connect();
  net::write(raw, net::buffer(std::string("POST /v2/models/m/infer HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n"
                                          "Inference-Header-Content-Length: 0\r\n\r\n")));
  EXPECT_THAT(ReadAll(raw), HasSubstr("Raw input has a byte_size (5000 bytes) that exceeds the maximum allowed value "
                                      "of 4096 bytes"));

  // Binary tensors: the JSON header is named when it alone is over the limit.
  for (const auto& [header, text] : {std::pair{"4500", "request JSON size of 4500 bytes exceeds"},
                                     std::pair{"100", "request size of 5000 bytes exceeds"}}) {
    auto binary = Connect();
    net::write(binary, net::buffer("POST /v2/models/m/infer HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n"
                                   "Inference-Header-Content-Length: " + std::string(header) + "\r\n\r\n"));
    EXPECT_THAT(ReadAll(binary), HasSubstr(text)) << header;
  }
  // Not an infer request: the body is JSON whole, whatever the headers say.
  auto generate = Connect();
  net::write(generate, net::buffer(std::string("POST /v2/models/m/generate HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n"
                                               "Inference-Header-Content-Length: 100\r\n\r\n")));
  EXPECT_THAT(ReadAll(generate), HasSubstr("request JSON size of 5000 bytes exceeds"));
}

TEST_F(HttpServerTest, HeadersOverTheLimitAre431) {
  auto s = Connect();
  net::write(s, net::buffer("GET /v2 HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(3000, 'a') + "\r\n\r\n"));
  const std::string all = ReadAll(s);
  EXPECT_THAT(all, HasSubstr("HTTP/1.1 431"));
  EXPECT_THAT(all, HasSubstr("request headers exceed the limit of 2048 bytes"));
}

TEST_F(HttpServerTest, ChunkedBodyOfTooManyChunksIs400) {
  auto s = Connect();
  std::string req = "POST /v2/models/m/infer HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 5; ++i) req += "1\r\n \r\n";
  net::write(s, net::buffer(req + "0\r\n\r\n"));
  const std::string all = ReadAll(s);
  EXPECT_THAT(all, HasSubstr("HTTP/1.1 400"));
  EXPECT_THAT(all, HasSubstr("Chunked request body exceeds maximum of 4 non-empty chunks. Send fewer or larger HTTP "
                             "chunks. (--http-max-body-chunks)"));
}

TEST_F(HttpServerTest, ConnectionOverTheLimitIsAnswered503WithoutBeingRead) {
  StartWith([](HttpServerOptions& o) { o.max_connections = 1; });
  auto first = Connect();
  net::write(first, net::buffer(std::string("GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n")));
  char buf[256];
  EXPECT_THAT(std::string(buf, first.read_some(net::buffer(buf))), HasSubstr("HTTP/1.1 200"));
  // The second connection is answered before it sends anything.
  auto second = Connect();
  const std::string refused = ReadAll(second);
  EXPECT_THAT(refused, HasSubstr("HTTP/1.1 503"));
  EXPECT_THAT(refused, HasSubstr("the server has 1 open HTTP connections, its limit (--http-max-connections)"));
  EXPECT_EQ(server->RejectedConnections(), 1u);
  EXPECT_EQ(server->OpenConnections(), 1u);
}

TEST_F(HttpServerTest, MalformedRequestIs400) {
  auto s = Connect();
  net::write(s, net::buffer(std::string("GARBAGE\r\n\r\n")));
  EXPECT_THAT(ReadAll(s), HasSubstr("HTTP/1.1 400"));
}

TEST_F(HttpServerTest, StalledBodyTimesOutWithoutBlockingOthers) {
  auto stalled = Connect();
  net::write(stalled, net::buffer(std::string("POST /v2/models/m/infer HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{")));
  // Others are served meanwhile.
  auto other = Connect();
  net::write(other, net::buffer(InferRequest(true)));
  EXPECT_THAT(ReadAll(other), HasSubstr(R"("data":[1,2])"));
  // The stalled one is closed after the read timeout (1 s): ReadAll returns
  // (a hang would be caught by the test timeout), and no request ran.
  EXPECT_THAT(ReadAll(stalled), Not(HasSubstr("HTTP/1.1 200")));
}

TEST_F(HttpServerTest, ClientLeavingCancelsTheInFlightRequest) {
  repo.model->set_hold(true);
  auto s = Connect();
  net::write(s, net::buffer(InferRequest()));
  auto held = repo.model->TakeHeld();
  ASSERT_TRUE(held->cancelled);
  s.close();
  for (int i = 0; i < 500 && !held->cancelled->IsCancelled(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(held->cancelled->IsCancelled());
  // The late completion is harmless.
  repo.model->Answer(*held);
  EXPECT_TRUE(server->WaitForInFlight(std::chrono::seconds(30)));  // liveness bound only
}

TEST_F(HttpServerTest, CompletionAfterStopIsDropped) {
  repo.model->set_hold(true);
  auto s = Connect();
  net::write(s, net::buffer(InferRequest()));
  auto held = repo.model->TakeHeld();
  server->StopAccepting();
  EXPECT_FALSE(server->WaitForInFlight(std::chrono::milliseconds(10)));
  server->Stop();
  repo.model->Answer(*held);  // after Stop: must not crash
  server.reset();
  held.reset();
}

TEST_F(HttpServerTest, StopAcceptingClosesThePort) {
  server->StopAccepting();
  tcp::socket s(ctx);
  boost::system::error_code ec;
  s.connect({net::ip::make_address("127.0.0.1"), server->port()}, ec);
  EXPECT_TRUE(ec);
}

TEST(HttpServerCreate, RejectsBadOptions) {
  Repo repo;
  HttpServerOptions o;
  o.io_threads = 0;
  EXPECT_FALSE(HttpServer::Create(o, &repo).ok());
  o.io_threads = 1;
  o.address = "not an address";
  EXPECT_THAT(HttpServer::Create(o, &repo).status().message(), HasSubstr("invalid http address"));
  EXPECT_FALSE(HttpServer::Create(HttpServerOptions{}, nullptr).ok());
  o.address = "127.0.0.1";
  for (auto zero : {&HttpServerOptions::max_connections, &HttpServerOptions::max_body_chunks}) {
    HttpServerOptions bad = o;
    bad.*zero = 0;
    EXPECT_FALSE(HttpServer::Create(bad, &repo).ok());
  }
  HttpServerOptions bad = o;
  bad.read_timeout = std::chrono::seconds(0);
  EXPECT_THAT(HttpServer::Create(bad, &repo).status().message(), HasSubstr("read_timeout"));
}

}  // namespace
}  // namespace ortserve
