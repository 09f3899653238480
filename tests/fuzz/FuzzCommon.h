#pragma once
// Shared helpers for the tests/fuzz targets (see README.md there).
//
// FUZZ_CHECK turns a broken invariant into an abort, so libFuzzer reports it
// as a crash and the corpus replay (ctest fuzz_*_corpus) fails on it, in any
// build type (it does not depend on NDEBUG).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/InferenceRequest.h"
#include "core/Tensor.h"

#define FUZZ_CHECK(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

namespace ortserve::fuzz {

// Reads every byte a tensor claims to hold, so a view past its owner's buffer
// is caught by ASan (and the value is used so the read is not optimised away).
inline void TouchTensor(const Tensor& t) {
  volatile unsigned char sink = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(t.data.data());
  unsigned char acc = 0;
  for (size_t i = 0; i < t.data.size(); ++i) acc ^= p[i];
  sink = acc;
  (void)sink;
}

// The wire-level invariants every decoder promises for a tensor it produced
// from typed/JSON data: the byte size matches the shape.
inline void CheckSizeMatchesShape(const Tensor& t) {
  const auto count = ElementCount(t.shape);
  FUZZ_CHECK(count.has_value());
  if (t.dtype == DataType::kBytes) {
    const auto elements = CountBytesElements(t.data.data(), t.data.size());
    FUZZ_CHECK(elements.has_value() && *elements == *count);
  } else {
    const auto bytes = FixedByteSize(t.dtype, t.shape);
    FUZZ_CHECK(bytes.has_value() && *bytes == t.data.size());
  }
}

// What both decoders promise of the sequence parameters they accepted
// (server/common/SequenceParameterChecks.h): one kind of id, a string id of
// at most 128 characters, and no true flag without an id.
inline void CheckSequenceParameters(const SequenceParameters& s) {
  FUZZ_CHECK(s.id == 0 || s.string_id.empty());
  FUZZ_CHECK(s.string_id.size() <= 128);
  FUZZ_CHECK(!(s.start || s.end) || s.has_id());
}

}  // namespace ortserve::fuzz
