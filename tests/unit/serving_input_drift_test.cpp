// Input drift statistics (serving/InputDrift.h, config/DriftConfig.h): PSI on
// known distributions, the accumulators, the profile text, the parameters,
// and a version's statistics recorded and compared as requests arrive.
#include "serving/InputDrift.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

#include "ParsedConfig.h"
#include "TestTensors.h"

namespace ortserve {
namespace {

using ::testing::HasSubstr;

TEST(PopulationStabilityIndex, IsZeroForTheSameFractions) {
  const std::vector<uint64_t> ref = {10, 20, 30, 40};
  const std::vector<uint64_t> cur = {100, 200, 300, 400};
  EXPECT_NEAR(PopulationStabilityIndex(ref, cur), 0.0, 1e-12);
}

TEST(PopulationStabilityIndex, MatchesTheFormulaOnKnownFractions) {
  // (0.9-0.5)ln(0.9/0.5) + (0.1-0.5)ln(0.1/0.5)
  const double expected = 0.4 * std::log(1.8) + (-0.4) * std::log(0.2);
  EXPECT_NEAR(PopulationStabilityIndex(std::vector<uint64_t>{50, 50}, std::vector<uint64_t>{90, 10}), expected, 1e-12);
  // Symmetric in its two arguments.
  EXPECT_NEAR(PopulationStabilityIndex(std::vector<uint64_t>{90, 10}, std::vector<uint64_t>{50, 50}), expected, 1e-12);
}

TEST(PopulationStabilityIndex, EmptyBinsTakeTheEpsilon) {
  // ref all in bin 0, current all in bin 1: each empty fraction counts as kDriftPsiEpsilon.
  const double e = kDriftPsiEpsilon;
  const double expected = (e - 1) * std::log(e / 1) + (1 - e) * std::log(1 / e);
  EXPECT_NEAR(PopulationStabilityIndex(std::vector<uint64_t>{7, 0}, std::vector<uint64_t>{0, 3}), expected, 1e-9);
  EXPECT_TRUE(std::isfinite(expected));
  EXPECT_EQ(PopulationStabilityIndex(std::vector<uint64_t>{0, 0}, std::vector<uint64_t>{1, 2}), 0.0);
}

TEST(DriftMoments, MergedShardsEqualOnePass) {
  std::mt19937 rng(7);
  std::normal_distribution<double> normal(3.0, 2.0);
  DriftMoments all, a, b;
  for (int i = 0; i < 1000; ++i) {
    const double x = normal(rng);
    all.Add(x);
    (i % 3 == 0 ? a : b).Add(x);
  }
  a.Merge(b);
  EXPECT_EQ(a.count, 1000u);
  EXPECT_NEAR(a.mean, all.mean, 1e-9);
  EXPECT_NEAR(a.Variance(), all.Variance(), 1e-9);
  EXPECT_NEAR(all.mean, 3.0, 0.3);
  EXPECT_NEAR(all.Variance(), 4.0, 0.6);
}

TEST(DriftBin, EdgesBelongToTheUpperBin) {
  const std::vector<double> edges = {0.0, 1.0};
  EXPECT_EQ(DriftBin(edges, -5), 0u);
  EXPECT_EQ(DriftBin(edges, 0.0), 1u);
  EXPECT_EQ(DriftBin(edges, 0.5), 1u);
  EXPECT_EQ(DriftBin(edges, 1.0), 2u);
  EXPECT_EQ(DriftBin(edges, 1e9), 2u);
}

TEST(DriftBin, CountsTheEdgesAtOrBelowAsABinarySearchWould) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(-10, 10);
  for (size_t n : {size_t{1}, size_t{11}, size_t{64}, size_t{65}, size_t{101}}) {
    std::vector<double> edges(n);
    for (double& e : edges) e = uniform(rng);
    std::sort(edges.begin(), edges.end());
    edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
    std::vector<double> probes(edges.begin(), edges.end());  // the edges themselves too
    for (int i = 0; i < 200; ++i) probes.push_back(uniform(rng) * 1.5);
    for (double x : probes) {
      const auto expected = static_cast<size_t>(std::upper_bound(edges.begin(), edges.end(), x) - edges.begin());
      EXPECT_EQ(DriftBin(edges, x), expected) << n << " edges, x " << x;
    }
  }
}

TEST(DriftProfileText, RoundTrips) {
  DriftProfile p;
  p.inputs.push_back({"INPUT0", {3, 0.1, 2.5}, {-1.5, 1e-7, 0.25}, {1, 0, 2, 0}});
  p.inputs.push_back({"TEXT", {0, 0, 0}, {4}, {0, 0}});
  auto back = ParseDriftProfile(WriteDriftProfile(p));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->inputs.size(), 2u);
  const DriftInputProfile& a = back->inputs[0];
  EXPECT_EQ(a.name, "INPUT0");
  EXPECT_EQ(a.moments.count, 3u);
  EXPECT_EQ(a.moments.mean, 0.1);
  EXPECT_EQ(a.moments.m2, 2.5);
  EXPECT_EQ(a.edges, (std::vector<double>{-1.5, 1e-7, 0.25}));
  EXPECT_EQ(a.counts, (std::vector<uint64_t>{1, 0, 2, 0}));
  EXPECT_EQ(back->Find("TEXT")->edges, std::vector<double>{4});
}

TEST(DriftProfileText, RefusesMalformedText) {
  EXPECT_THAT(ParseDriftProfile("hello\n").status().message(), HasSubstr("first line"));
  EXPECT_THAT(ParseDriftProfile("ortserve-drift-profile 1\n").status().message(), HasSubstr("no input"));
  EXPECT_THAT(ParseDriftProfile("ortserve-drift-profile 1\ninput x 1 0 0 1 0 | 1 1 1\n").status().message(),
              HasSubstr("line 2: edges must be strictly increasing"));
  EXPECT_THAT(ParseDriftProfile("ortserve-drift-profile 1\ninput x 1 0 0 1 | 1\n").status().message(),
              HasSubstr("one count more than edges"));
  EXPECT_THAT(ParseDriftProfile("ortserve-drift-profile 1\ninput x 1 0 0 abc | 1 1\n").status().message(),
              HasSubstr("edge 'abc'"));
  EXPECT_THAT(ParseDriftProfile("ortserve-drift-profile 1\ninput x 1 0 0 1 | 1 -1\n").status().message(),
              HasSubstr("whole numbers"));
}

Result<std::optional<DriftConfig>> ConfigWith(const std::string& parameters) {
  return DriftConfig::FromConfig(Parse("name: \"m\"\n" + parameters));
}

std::string Param(const std::string& key, const std::string& value) {
  return "parameters { key: \"" + key + "\" value { string_value: \"" + value + "\" } }\n";
}

TEST(DriftConfig, OffUnlessConfigured) {
  auto c = ConfigWith("");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_value());
}

TEST(DriftConfig, ReadsItsParameters) {
  auto c = ConfigWith(Param("drift_baseline_requests", "500") + Param("drift_bins", "20"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ((*c)->baseline_requests, 500u);
  EXPECT_EQ((*c)->bins, 20);
  auto r = ConfigWith(Param("drift_reference", "profiles/prod.txt"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->reference_path, "profiles/prod.txt");
  EXPECT_EQ((*r)->bins, kDriftDefaultBins);
  EXPECT_EQ((*r)->sample_fraction, kDriftDefaultSampleFraction);
  auto f = ConfigWith(Param("drift_reference", "p.txt") + Param("drift_sample_fraction", "0.25"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->sample_fraction, 0.25);
  auto all = ConfigWith(Param("drift_baseline_requests", "5") + Param("drift_sample_fraction", "1"));
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ((*all)->sample_fraction, 1.0);
}

TEST(DriftConfig, EveryBadParameterIsNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Param("drift_baseline_requests", "0"), "'drift_baseline_requests' value '0'"},
      {Param("drift_baseline_requests", "ten"), "'drift_baseline_requests' value 'ten'"},
      {Param("drift_baseline_requests", "10") + Param("drift_bins", "1"), "'drift_bins' value '1'"},
      {Param("drift_baseline_requests", "10") + Param("drift_bins", "101"), "'drift_bins' value '101'"},
      {Param("drift_bins", "10"), "'drift_bins' needs 'drift_baseline_requests'"},
      {Param("drift_reference", "../other/p.txt"), "'drift_reference' value '../other/p.txt'"},
      {Param("drift_reference", "/etc/p.txt"), "'drift_reference' value '/etc/p.txt'"},
      {Param("drift_reference", "p.txt") + Param("drift_bins", "5"), "'drift_bins' cannot be used with"},
      {Param("drift_reference", "p.txt") + Param("drift_baseline_requests", "5"), "exclude each other"},
      {Param("drift_sample_fraction", "0.5"), "'drift_sample_fraction' needs 'drift_baseline_requests' or"},
      {Param("drift_reference", "p.txt") + Param("drift_sample_fraction", "0"),
       "'drift_sample_fraction' value '0'"},
      {Param("drift_reference", "p.txt") + Param("drift_sample_fraction", "-0.1"),
       "'drift_sample_fraction' value '-0.1'"},
      {Param("drift_reference", "p.txt") + Param("drift_sample_fraction", "1.5"),
       "'drift_sample_fraction' value '1.5'"},
      {Param("drift_reference", "p.txt") + Param("drift_sample_fraction", "nan"),
       "'drift_sample_fraction' value 'nan'"},
      {Param("drift_reference", "p.txt") + Param("drift_sample_fraction", "half"),
       "'drift_sample_fraction' value 'half'"},
  };
  for (const auto& [params, expected] : cases) {
    auto c = ConfigWith(params);
    ASSERT_FALSE(c.ok()) << params;
    EXPECT_THAT(c.status().message(), HasSubstr(expected)) << params;
  }
}

const char* kTwoInputs = R"(name: "m"
  input { name: "X" data_type: TYPE_FP32 dims: [ 4 ] }
  input { name: "S" data_type: TYPE_STRING dims: [ 1 ] })";

std::unique_ptr<InferenceRequest> Request(std::mt19937& rng, double shift, size_t text_length) {
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> values(4);
  for (float& v : values) v = uniform(rng) + static_cast<float>(shift);
  auto r = std::make_unique<InferenceRequest>();
  r->inputs.push_back(testing_util::Fp32("X", {4}, values));
  r->inputs.push_back(testing_util::Strings("S", {1}, {std::string(text_length, 'a')}));
  return r;
}

// A recorded reference, every request counted (the tests' exact counts).
DriftConfig Baseline(uint64_t requests, double sample_fraction = 1.0) {
  DriftConfig c;
  c.baseline_requests = requests;
  c.sample_fraction = sample_fraction;
  return c;
}

TEST(InputDrift, RecordsItsReferenceFromTheFirstRequests) {
  InputDrift drift(Parse(kTwoInputs), Baseline(100), nullptr);
  std::mt19937 rng(1);
  for (int i = 0; i < 99; ++i) drift.Observe(*Request(rng, 0, 5));
  DriftSummary s = drift.Snapshot();
  EXPECT_TRUE(s.recording);
  EXPECT_EQ(s.requests, 99u);
  EXPECT_FALSE(s.inputs[0].psi);
  EXPECT_FALSE(s.AsProfile());
  drift.Observe(*Request(rng, 0, 5));
  s = drift.Snapshot();
  ASSERT_FALSE(s.recording);
  ASSERT_TRUE(s.reference);
  const DriftInputProfile* x = s.reference->Find("X");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->moments.count, 400u);
  EXPECT_NEAR(x->moments.mean, 0.5, 0.05);
  EXPECT_NEAR(x->moments.Variance(), 1.0 / 12, 0.02);
  // The deciles of 400 distinct values, and one edge just above their maximum.
  ASSERT_EQ(x->edges.size(), static_cast<size_t>(kDriftDefaultBins));
  for (size_t b = 0; b < x->counts.size(); ++b) EXPECT_EQ(x->counts[b], b < 10 ? 40u : 0u) << b;
  const DriftInputProfile* text = s.reference->Find("S");
  ASSERT_TRUE(text);
  // A constant length: below it, it, above it.
  EXPECT_EQ(text->edges, (std::vector<double>{5, std::nextafter(5.0, 6.0)}));
  EXPECT_EQ(text->counts, (std::vector<uint64_t>{0, 100, 0}));
  // Nothing is in the current window yet.
  EXPECT_EQ(s.inputs[0].moments.count, 0u);
  EXPECT_EQ(*s.inputs[0].psi, 0.0);
}

TEST(InputDrift, StationaryStaysLowAndAShiftRaisesPsi) {
  InputDrift drift(Parse(kTwoInputs), Baseline(500), nullptr);
  std::mt19937 rng(2);
  for (int i = 0; i < 1500; ++i) drift.Observe(*Request(rng, 0, 5));
  DriftSummary s = drift.Snapshot();
  EXPECT_EQ(s.requests, 1500u);
  EXPECT_EQ(s.observed_requests, 1500u);
  EXPECT_EQ(s.sample_fraction, 1.0);
  EXPECT_EQ(s.inputs[0].moments.count, 4000u);
  EXPECT_LT(*s.inputs[0].psi, 0.05);
  EXPECT_LT(*s.inputs[1].psi, 0.05);
  for (int i = 0; i < 1000; ++i) drift.Observe(*Request(rng, 0.5, 9));
  s = drift.Snapshot();
  EXPECT_GT(*s.inputs[0].psi, 0.2);
  EXPECT_GT(*s.inputs[1].psi, 0.2);
  EXPECT_NEAR(s.inputs[0].moments.mean, 0.5 + 0.5 * 1000 / 2000, 0.05);
}

TEST(InputDrift, ALoadedProfileIsTheReferenceFromTheStart) {
  InputDrift first(Parse(kTwoInputs), Baseline(200), nullptr);
  std::mt19937 rng(3);
  for (int i = 0; i < 1200; ++i) first.Observe(*Request(rng, 0, 5));
  auto parsed = ParseDriftProfile(WriteDriftProfile(*first.Snapshot().AsProfile()));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  DriftConfig loaded;
  loaded.reference_path = "p.txt";
  loaded.sample_fraction = 1.0;
  InputDrift second(Parse(kTwoInputs), loaded,
                    std::make_shared<const DriftProfile>(std::move(parsed).value()));
  DriftSummary s = second.Snapshot();
  EXPECT_FALSE(s.recording);
  EXPECT_EQ(s.reference->Find("X")->moments.count, 4000u);  // the window of the first, not its baseline
  for (int i = 0; i < 1000; ++i) second.Observe(*Request(rng, 0, 5));
  s = second.Snapshot();
  EXPECT_LT(*s.inputs[0].psi, 0.05);
  for (int i = 0; i < 1000; ++i) second.Observe(*Request(rng, -0.5, 5));
  EXPECT_GT(*second.Snapshot().inputs[0].psi, 0.2);
}

TEST(InputDrift, InputsInAnyOrderAndOfEveryTypeAreCounted) {
  const char* config = R"(name: "m"
    input { name: "A" data_type: TYPE_INT8 dims: [ 2 ] }
    input { name: "B" data_type: TYPE_FP16 dims: [ 2 ] }
    input { name: "C" data_type: TYPE_BOOL dims: [ 2 ] }
    input { name: "D" data_type: TYPE_UINT64 dims: [ 2 ] })";
  InputDrift drift(Parse(config), Baseline(1), nullptr);
  auto typed = [](std::string name, DataType type, std::vector<uint8_t> bytes) {
    Tensor t;
    t.name = std::move(name);
    t.dtype = type;
    t.shape = {2};
    t.data = TensorData::Copy(bytes.data(), bytes.size());
    return t;
  };
  InferenceRequest r;
  // Not in the config's order, with an input the config does not list.
  r.inputs.push_back(typed("D", DataType::kUint64, {7, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0}));
  r.inputs.push_back(typed("extra", DataType::kUint8, {1, 2}));
  r.inputs.push_back(typed("C", DataType::kBool, {0, 5}));
  r.inputs.push_back(typed("A", DataType::kInt8, {0xfe, 3}));         // -2, 3
  r.inputs.push_back(typed("B", DataType::kFp16, {0x00, 0x3c, 0x00, 0xc0}));  // 1.0, -2.0
  drift.Observe(r);
  const DriftSummary s = drift.Snapshot();
  ASSERT_FALSE(s.recording);
  const auto mean = [&](const char* name) { return s.reference->Find(name)->moments.mean; };
  EXPECT_DOUBLE_EQ(mean("A"), 0.5);
  EXPECT_DOUBLE_EQ(mean("B"), -0.5);
  EXPECT_DOUBLE_EQ(mean("C"), 0.5);
  EXPECT_DOUBLE_EQ(mean("D"), (7.0 + 257.0) / 2);
  EXPECT_EQ(s.reference->Find("extra"), nullptr);
}

TEST(InputDrift, ThreadsObservingAtOnceLoseNothing) {
  InputDrift drift(Parse(kTwoInputs), Baseline(10), nullptr);
  std::mt19937 seed(4);
  for (int i = 0; i < 10; ++i) drift.Observe(*Request(seed, 0, 5));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&drift, t] {
      std::mt19937 rng(100 + t);
      for (int i = 0; i < 500; ++i) drift.Observe(*Request(rng, 0, 5));
    });
  }
  for (auto& t : threads) t.join();
  const DriftSummary s = drift.Snapshot();
  EXPECT_EQ(s.requests, 2010u);
  EXPECT_EQ(s.observed_requests, 2010u);
  EXPECT_EQ(s.inputs[0].moments.count, 8000u);
  uint64_t binned = 0;
  for (uint64_t c : s.inputs[0].counts) binned += c;
  EXPECT_EQ(binned, 8000u);
}

TEST(InputDrift, ReadsAtMostItsQuotaOfALargeTensor) {
  InputDrift drift(Parse(R"(name: "m" input { name: "X" data_type: TYPE_FP32 dims: [ -1 ] })"), Baseline(1), nullptr);
  auto request = std::make_unique<InferenceRequest>();
  request->inputs.push_back(testing_util::Fp32("X", {300}, std::vector<float>(300, 1.0f)));
  drift.Observe(*request);  // the baseline
  drift.Observe(*request);
  const DriftSummary s = drift.Snapshot();
  EXPECT_EQ(s.reference->Find("X")->moments.count, 150u);  // every second of 300
  EXPECT_EQ(s.inputs[0].moments.count, 150u);
  EXPECT_EQ(s.inputs[0].moments.mean, 1.0);
  EXPECT_EQ(s.inputs[0].moments.Variance(), 0.0);
}

TEST(DriftSampler, FractionOneTakesEveryRequest) {
  const DriftSampler all(1.0);
  for (uint64_t n : {0ULL, 1ULL, 2ULL, 12345ULL, ~0ULL}) EXPECT_TRUE(all.Take(n)) << n;
  const DriftSampler nearly(std::nextafter(1.0, 0.0));  // its threshold would overflow 2^64
  for (uint64_t n = 0; n < 1000; ++n) EXPECT_TRUE(nearly.Take(n)) << n;
}

TEST(DriftSampler, TakesItsFractionOfAnyPrefixWithinAFewRequests) {
  for (double fraction : {0.5, 0.25, 0.1, 0.01, 0.3}) {
    const DriftSampler sampler(fraction);
    EXPECT_TRUE(sampler.Take(0)) << fraction;
    uint64_t taken = 0;
    double worst = 0;
    for (uint64_t n = 0; n < 100000; ++n) {
      taken += sampler.Take(n) ? 1 : 0;
      worst = std::max(worst, std::abs(static_cast<double>(taken) - static_cast<double>(n + 1) * fraction));
    }
    EXPECT_LT(worst, 4.0) << fraction;
  }
}

TEST(DriftSampler, TrafficWithAPeriodDoesNotAliasWithIt) {
  // Every 10th request would take one residue class mod 10 only.
  const DriftSampler sampler(0.1);
  std::vector<uint64_t> per_class(10, 0);
  for (uint64_t n = 0; n < 100000; ++n) per_class[n % 10] += sampler.Take(n) ? 1 : 0;
  for (size_t r = 0; r < per_class.size(); ++r) {
    EXPECT_GE(per_class[r], 990u) << r;
    EXPECT_LE(per_class[r], 1010u) << r;
  }
}

TEST(InputDrift, ASampledWindowCountsEveryValueOfItsFractionOfTheRequests) {
  InputDrift drift(Parse(kTwoInputs), Baseline(100, 0.25), nullptr);
  std::mt19937 rng(5);
  for (int i = 0; i < 100; ++i) drift.Observe(*Request(rng, 0, 5));
  DriftSummary s = drift.Snapshot();
  // The reference counts all of its requests.
  EXPECT_EQ(s.observed_requests, 100u);
  EXPECT_EQ(s.reference->Find("X")->moments.count, 400u);
  for (int i = 0; i < 4000; ++i) drift.Observe(*Request(rng, 0, 5));
  s = drift.Snapshot();
  EXPECT_EQ(s.requests, 4100u);  // every admitted request
  EXPECT_EQ(s.sample_fraction, 0.25);
  // One thread, one shard: 1000 of the 4000 within a few.
  ASSERT_GE(s.observed_requests, 100u + 1000u - 4u);
  ASSERT_LE(s.observed_requests, 100u + 1000u + 4u);
  const uint64_t sampled = s.observed_requests - 100u;
  EXPECT_EQ(s.inputs[0].moments.count, 4 * sampled);  // every value of a sampled request
  EXPECT_EQ(s.inputs[1].moments.count, sampled);
  uint64_t binned = 0;
  for (uint64_t c : s.inputs[0].counts) binned += c;
  EXPECT_EQ(binned, 4 * sampled);
  EXPECT_LT(*s.inputs[0].psi, 0.05);
  EXPECT_NEAR(s.inputs[0].moments.mean, 0.5, 0.03);
  for (int i = 0; i < 4000; ++i) drift.Observe(*Request(rng, 0.5, 9));
  s = drift.Snapshot();
  EXPECT_EQ(s.requests, 8100u);
  EXPECT_GT(*s.inputs[0].psi, 0.2);
  EXPECT_GT(*s.inputs[1].psi, 0.2);
  EXPECT_NEAR(s.inputs[0].moments.mean, 0.75, 0.03);
}

TEST(InputDrift, ASampledWindowOfPeriodicTrafficMatchesItsReference) {
  // Nine requests around 0, then one around 5, over and over: the reference
  // (every request) and the sampled window see the same mix.
  InputDrift drift(Parse(kTwoInputs), Baseline(1000, 0.1), nullptr);
  std::mt19937 rng(6);
  for (int i = 0; i < 11000; ++i) drift.Observe(*Request(rng, i % 10 == 9 ? 5.0 : 0.0, 5));
  const DriftSummary s = drift.Snapshot();
  EXPECT_EQ(s.requests, 11000u);
  EXPECT_NEAR(static_cast<double>(s.observed_requests), 1000.0 + 1000.0, 4.0);
  EXPECT_NEAR(s.inputs[0].moments.mean, s.reference->Find("X")->moments.mean, 0.1);
  EXPECT_LT(*s.inputs[0].psi, 0.05);
}

}  // namespace
}  // namespace ortserve
