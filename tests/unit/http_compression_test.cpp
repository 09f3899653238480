// Compression: round trips, the gzip bomb cap, corrupt input, header parsing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string_view>
#include <vector>

#include "server/http/Compression.h"
#include "server/http/HttpStatus.h"

namespace ortserve::http {
namespace {

using ::testing::HasSubstr;

TEST(HttpCompression, RoundTripsGzipAndDeflate) {
  const std::string head = R"({"outputs":[]})";
  std::string tail(100000, '\0');
  for (size_t i = 0; i < tail.size(); ++i) tail[i] = static_cast<char>(i * 7);
  for (auto coding : {ContentCoding::kGzip, ContentCoding::kDeflate}) {
    auto c = Compress(coding, {head, tail});
    ASSERT_TRUE(c.ok());
    auto d = Decompress(coding, *c, 1 << 20);
    ASSERT_TRUE(d.ok()) << d.status().message();
    EXPECT_EQ(*d, head + tail);
  }
  auto gz = Compress(ContentCoding::kGzip, {head});
  EXPECT_EQ(static_cast<unsigned char>((*gz)[0]), 0x1f);  // gzip magic
}

TEST(HttpCompression, DeflateAcceptsRawDeflateToo) {
  // A raw deflate stream: the zlib stream without its 2-byte header and 4-byte trailer.
  auto z = Compress(ContentCoding::kDeflate, {"hello hello hello"});
  ASSERT_TRUE(z.ok());
  const std::string raw = z->substr(2, z->size() - 6);
  auto d = Decompress(ContentCoding::kDeflate, raw, 1024);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(*d, "hello hello hello");
}

TEST(HttpCompression, GzipBombStopsAtTheCap) {
  // 256 MiB of zeros compress (at level 1) to ~1.1 MiB; inflating must stop at the 1 MiB cap.
  const std::string zeros(1 << 20, '\0');
  std::vector<std::string_view> parts(256, zeros);
  auto bomb = Compress(ContentCoding::kGzip, parts);
  ASSERT_TRUE(bomb.ok());
  EXPECT_LT(bomb->size(), size_t{2} << 20);
  auto d = Decompress(ContentCoding::kGzip, *bomb, 1 << 20);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kPayloadTooLarge);
  EXPECT_EQ(HttpStatusFor(d.status().code()), 400u);  // as Triton
  EXPECT_THAT(d.status().message(), HasSubstr("exceeds the maximum allowed value of 1048576 bytes"));
}

TEST(HttpCompression, InflaterStopsAfterItsBudgetAndGoesOnLater) {
  std::string data(1 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 7);
  auto c = Compress(ContentCoding::kGzip, {data});
  ASSERT_TRUE(c.ok());
  auto inflater = Inflater::Start(ContentCoding::kGzip, *c, 2 << 20);
  ASSERT_TRUE(inflater.ok());
  auto first = (*inflater)->Run(256 << 10);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_FALSE(*first);  // more to come
  auto rest = (*inflater)->Run(std::numeric_limits<size_t>::max());
  ASSERT_TRUE(rest.ok()) << rest.status().message();
  EXPECT_TRUE(*rest);
  EXPECT_EQ((*inflater)->TakeOutput(), data);
  EXPECT_FALSE(Inflater::Start(ContentCoding::kIdentity, *c, 1 << 20).ok());
}

TEST(HttpCompression, BombIsRefusedWithoutGrowingPastTheCap) {
  // 64 MiB of zeros against a 1 MiB cap, a step of 256 KiB at a time: the
  // output never holds more than the cap (no doubling past it).
  const std::string zeros(1 << 20, '\0');
  std::vector<std::string_view> parts(64, zeros);
  auto bomb = Compress(ContentCoding::kGzip, parts);
  ASSERT_TRUE(bomb.ok());
  auto inflater = Inflater::Start(ContentCoding::kGzip, *bomb, 1 << 20);
  ASSERT_TRUE(inflater.ok());
  Result<bool> step = false;
  int steps = 0;
  while (step.ok() && !*step) {
    step = (*inflater)->Run(256 << 10);
    ++steps;
  }
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.status().code(), StatusCode::kPayloadTooLarge);
  EXPECT_LE(steps, 5);
  EXPECT_LE((*inflater)->TakeOutput().capacity(), size_t{1} << 21);
}

TEST(HttpCompression, ExactlyAtTheCapPasses) {
  const std::string data(4096, 'a');
  auto c = Compress(ContentCoding::kGzip, {data});
  auto d = Decompress(ContentCoding::kGzip, *c, 4096);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->size(), 4096u);
  EXPECT_EQ(Decompress(ContentCoding::kGzip, *c, 4095).status().code(), StatusCode::kPayloadTooLarge);
}

TEST(HttpCompression, CorruptTruncatedAndTrailingGarbage) {
  auto c = Compress(ContentCoding::kGzip, {std::string(1000, 'x')});
  ASSERT_TRUE(c.ok());
  auto truncated = Decompress(ContentCoding::kGzip, c->substr(0, c->size() / 2), 1 << 20);
  EXPECT_EQ(truncated.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(truncated.status().message(), HasSubstr("truncated gzip"));
  auto corrupt = Decompress(ContentCoding::kGzip, "this is not gzip", 1 << 20);
  EXPECT_EQ(corrupt.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(corrupt.status().message(), HasSubstr("gzip"));
  auto trailing = Decompress(ContentCoding::kGzip, *c + "junk", 1 << 20);
  EXPECT_EQ(trailing.status().code(), StatusCode::kInvalidArgument);
}

TEST(HttpCompression, IdentityRespectsTheLimit) {
  EXPECT_EQ(Decompress(ContentCoding::kIdentity, std::string(11, 'a'), 10).status().code(),
            StatusCode::kPayloadTooLarge);
}

TEST(HttpCompression, ContentEncodingHeader) {
  EXPECT_EQ(ParseContentEncoding("").value(), ContentCoding::kIdentity);
  EXPECT_EQ(ParseContentEncoding("identity").value(), ContentCoding::kIdentity);
  EXPECT_EQ(ParseContentEncoding("GZIP").value(), ContentCoding::kGzip);
  EXPECT_EQ(ParseContentEncoding(" deflate ").value(), ContentCoding::kDeflate);
  auto br = ParseContentEncoding("br");
  ASSERT_FALSE(br.ok());
  EXPECT_EQ(HttpStatusFor(br.status().code()), 501u);
  EXPECT_THAT(br.status().message(), HasSubstr("unsupported Content-Encoding: br"));
}

TEST(HttpCompression, AcceptEncodingChoice) {
  EXPECT_EQ(ChooseResponseCoding(""), ContentCoding::kIdentity);
  EXPECT_EQ(ChooseResponseCoding("gzip"), ContentCoding::kGzip);
  EXPECT_EQ(ChooseResponseCoding("deflate"), ContentCoding::kDeflate);
  EXPECT_EQ(ChooseResponseCoding("deflate, gzip;q=0.5"), ContentCoding::kGzip);
  EXPECT_EQ(ChooseResponseCoding("gzip;q=0, deflate"), ContentCoding::kDeflate);
  EXPECT_EQ(ChooseResponseCoding("br, identity"), ContentCoding::kIdentity);
}

}  // namespace
}  // namespace ortserve::http
