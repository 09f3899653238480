// The response cache's keys, LRU eviction by bytes, and owner drops
// (serving/ResponseCache.h).
#include "serving/ResponseCache.h"

#include <gtest/gtest.h>

#include "TestTensors.h"

namespace ortserve {
namespace {

using testing_util::Floats;
using testing_util::Fp32;

InferenceRequest Request(std::vector<Tensor> inputs, std::vector<std::string> outputs = {}) {
  InferenceRequest r;
  r.inputs = std::move(inputs);
  for (auto& name : outputs) r.requested_outputs.push_back({std::move(name), false});
  return r;
}

// An answer of `floats` 4-byte elements.
std::vector<Tensor> Answer(float value, size_t floats = 4) {
  return {Fp32("OUT", {static_cast<int64_t>(floats)}, std::vector<float>(floats, value))};
}

TEST(ResponseCacheKey, InputOrderDoesNotMatterButEverythingElseDoes) {
  const auto a = Fp32("A", {2}, {1, 2});
  const auto b = Fp32("B", {2}, {3, 4});
  const auto key = ResponseCache::KeyOf(1, Request({a, b}));
  EXPECT_EQ(key.bytes, ResponseCache::KeyOf(1, Request({b, a})).bytes);
  EXPECT_EQ(key.hash, ResponseCache::KeyOf(1, Request({b, a})).hash);

  EXPECT_NE(key.bytes, ResponseCache::KeyOf(2, Request({a, b})).bytes) << "another model version";
  EXPECT_NE(key.bytes, ResponseCache::KeyOf(1, Request({a, Fp32("B", {2}, {3, 5})})).bytes) << "other data";
  EXPECT_NE(key.bytes, ResponseCache::KeyOf(1, Request({a, Fp32("B", {1, 2}, {3, 4})})).bytes) << "other shape";
  EXPECT_NE(key.bytes, ResponseCache::KeyOf(1, Request({a, Fp32("C", {2}, {3, 4})})).bytes) << "other name";
  Tensor as_int = b;
  as_int.dtype = DataType::kInt32;
  EXPECT_NE(key.bytes, ResponseCache::KeyOf(1, Request({a, as_int})).bytes) << "other data type";
  EXPECT_NE(key.bytes, ResponseCache::KeyOf(1, Request({a, b}, {"OUT"})).bytes) << "requested outputs";
  EXPECT_NE(ResponseCache::KeyOf(1, Request({a, b}, {"X", "Y"})).bytes,
            ResponseCache::KeyOf(1, Request({a, b}, {"Y", "X"})).bytes)
      << "requested output order";
  InferenceRequest top3 = Request({a, b}, {"OUT"});
  top3.requested_outputs[0].classification = 3;
  EXPECT_NE(ResponseCache::KeyOf(1, Request({a, b}, {"OUT"})).bytes, ResponseCache::KeyOf(1, top3).bytes)
      << "classification";
  InferenceRequest binary = Request({a, b}, {"OUT"});
  binary.requested_outputs[0].binary_data = true;
  EXPECT_EQ(ResponseCache::KeyOf(1, Request({a, b}, {"OUT"})).bytes, ResponseCache::KeyOf(1, binary).bytes)
      << "binary_data changes only the encoding";
}

TEST(ResponseCache, HitReturnsTheStoredBytesMissReturnsNothing) {
  ResponseCache cache(1 << 20);
  const auto key = ResponseCache::KeyOf(1, Request({Fp32("A", {1}, {1})}));
  EXPECT_FALSE(cache.Lookup(key));
  EXPECT_TRUE(cache.Insert(key, Answer(7)));
  auto hit = cache.Lookup(key);
  ASSERT_TRUE(hit);
  ASSERT_EQ(hit->size(), 1u);
  EXPECT_EQ((*hit)[0].name, "OUT");
  EXPECT_EQ((*hit)[0].shape, Shape({4}));
  EXPECT_EQ(Floats((*hit)[0]), std::vector<float>(4, 7));
  const ResponseCacheUsage usage = cache.Usage();
  EXPECT_EQ(usage.hits, 1u);
  EXPECT_EQ(usage.misses, 1u);
  EXPECT_EQ(usage.entries, 1u);
  EXPECT_EQ(usage.insertions, 1u);
  EXPECT_GT(usage.used_bytes, 16u);
}

TEST(ResponseCache, EntriesOwnTheirBytes) {
  ResponseCache cache(1 << 20);
  const auto key = ResponseCache::KeyOf(1, Request({Fp32("A", {1}, {1})}));
  std::vector<Tensor> outputs = Answer(3);
  ASSERT_TRUE(cache.Insert(key, outputs));
  EXPECT_NE((*cache.Lookup(key))[0].data.data(), outputs[0].data.data()) << "stored as a copy";
  outputs.clear();
  EXPECT_EQ(Floats((*cache.Lookup(key))[0]), std::vector<float>(4, 3));
}

TEST(ResponseCache, EvictsLeastRecentlyUsedToStayWithinItsBytes) {
  const auto key = [](float x) { return ResponseCache::KeyOf(1, Request({Fp32("A", {1}, {x})})); };
  // Learn what one entry costs, then size the cache for three.
  ResponseCache probe(1 << 20);
  probe.Insert(key(0), Answer(0, 256));
  const uint64_t entry = probe.Usage().used_bytes;

  ResponseCache cache(3 * entry);
  for (float x : {1.0f, 2.0f, 3.0f}) ASSERT_TRUE(cache.Insert(key(x), Answer(x, 256)));
  ASSERT_TRUE(cache.Lookup(key(1)));  // 1 is now the most recently used; 2 the least
  ASSERT_TRUE(cache.Insert(key(4), Answer(4, 256)));
  EXPECT_FALSE(cache.Lookup(key(2)));
  for (float x : {1.0f, 3.0f, 4.0f}) EXPECT_TRUE(cache.Lookup(key(x))) << x;
  const ResponseCacheUsage usage = cache.Usage();
  EXPECT_EQ(usage.evictions, 1u);
  EXPECT_EQ(usage.entries, 3u);
  EXPECT_LE(usage.used_bytes, usage.capacity_bytes);
}

TEST(ResponseCache, AnEntryLargerThanTheCacheIsNotStoredAndEvictsNothing) {
  ResponseCache cache(4096);
  const auto small = ResponseCache::KeyOf(1, Request({Fp32("A", {1}, {1})}));
  const auto large = ResponseCache::KeyOf(1, Request({Fp32("A", {1}, {2})}));
  ASSERT_TRUE(cache.Insert(small, Answer(1)));
  EXPECT_FALSE(cache.Insert(large, Answer(2, 4096)));
  EXPECT_TRUE(cache.Lookup(small));
  EXPECT_EQ(cache.Usage().evictions, 0u);
}

TEST(ResponseCache, AHitOutlivesItsEviction) {
  const auto key = [](float x) { return ResponseCache::KeyOf(1, Request({Fp32("A", {1}, {x})})); };
  ResponseCache probe(1 << 20);
  probe.Insert(key(0), Answer(0, 64));
  ResponseCache cache(probe.Usage().used_bytes);  // room for one
  ASSERT_TRUE(cache.Insert(key(1), Answer(1, 64)));
  auto held = cache.Lookup(key(1));
  ASSERT_TRUE(cache.Insert(key(2), Answer(2, 64)));
  EXPECT_FALSE(cache.Lookup(key(1)));
  EXPECT_EQ(Floats((*held)[0]), std::vector<float>(64, 1));
}

TEST(ResponseCache, DropOwnerForgetsOnlyThatVersion) {
  ResponseCache cache(1 << 20);
  const auto mine = ResponseCache::KeyOf(1, Request({Fp32("A", {1}, {1})}));
  const auto other = ResponseCache::KeyOf(2, Request({Fp32("A", {1}, {1})}));
  ASSERT_TRUE(cache.Insert(mine, Answer(1)));
  ASSERT_TRUE(cache.Insert(other, Answer(2)));
  const uint64_t before = cache.Usage().used_bytes;
  cache.DropOwner(1);
  EXPECT_FALSE(cache.Lookup(mine));
  ASSERT_TRUE(cache.Lookup(other));
  EXPECT_EQ(Floats((*cache.Lookup(other))[0]), std::vector<float>(4, 2));
  EXPECT_EQ(cache.Usage().entries, 1u);
  EXPECT_LT(cache.Usage().used_bytes, before);
  EXPECT_EQ(cache.Usage().evictions, 0u) << "drops are not evictions";
}

TEST(ResponseCache, TheFirstAnswerOfARaceStays) {
  ResponseCache cache(1 << 20);
  const auto key = ResponseCache::KeyOf(1, Request({Fp32("A", {1}, {1})}));
  ASSERT_TRUE(cache.Insert(key, Answer(1)));
  EXPECT_FALSE(cache.Insert(key, Answer(1)));
  EXPECT_EQ(cache.Usage().entries, 1u);
}

}  // namespace
}  // namespace ortserve
