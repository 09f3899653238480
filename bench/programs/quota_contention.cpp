// The cost of a quota admission (ClientQuotas::Acquire and the ticket's
// release) on the request path, single-threaded and with threads contending:
// all on one client (one shard's mutex, the worst case) and spread over
// 10,000 clients. Prints wall-clock ns per admission, per thread and over
// all threads (on a machine with fewer free cores than threads the two
// measure time-sharing, not contention). Usage: ortserve_quota_bench
// [admissions per thread, default 2000000].
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "server/common/ClientQuotas.h"

using ortserve::common::ClientQuotas;
using ortserve::common::QuotaConfig;

namespace {

double NsPerAdmission(int threads, int clients, long per_thread) {
  auto config = QuotaConfig::Parse(R"({"default": {"rate": 1e9, "burst": 1e9, "max_in_flight": 1000}})", "bench");
  if (!config.ok()) std::abort();
  ClientQuotas quotas(std::move(config).value());
  std::vector<std::string> ids;
  for (int i = 0; i < clients; ++i) ids.push_back("client-" + std::to_string(i));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (long i = 0; i < per_thread; ++i) {
        auto admitted = quotas.Acquire(ids[(i * 7919 + t) % clients], "model");
        if (admitted.index() != 0) std::abort();
      }
    });
  }
  for (auto& w : workers) w.join();
  const std::chrono::duration<double, std::nano> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / static_cast<double>(per_thread);
}

}  // namespace

int main(int argc, char** argv) {
  const long per_thread = argc > 1 ? std::atol(argv[1]) : 2'000'000;
  const unsigned cores = std::thread::hardware_concurrency();
  std::printf("threads clients  wall_ns_per_admission_each_thread  wall_ns_per_admission_all (hardware threads: %u)\n",
              cores);
  for (int threads : {1, 2, 4}) {
    for (int clients : {1, 10000}) {
      const double each = NsPerAdmission(threads, clients, per_thread);
      std::printf("%7d %7d %34.1f %26.1f\n", threads, clients, each, each / threads);
    }
  }
  return 0;
}
