#pragma once
// Compares a GPU instance's outputs with a CPU FP32 reference, and any version
// with its reference model at load (repository/ReferenceCheck.h) (docs/design.md:
// a numerical tolerance check whenever an optimization changes the math). Pure:
// no ORT, no device; unit-tested on CPU.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/Tensor.h"

namespace ortserve {

struct NumericalReport {
  bool passed = true;
  // Largest |actual - expected| over every element of every floating-point
  // output, and largest |actual - expected| / |expected| over the elements
  // with |expected| >= 1 (near zero only the absolute error is meaningful).
  // NaN on one side only is an infinite error; NaN on both (or equal
  // infinities) none.
  double max_abs_error = 0.0;
  double max_rel_error = 0.0;
  // Where the worst element (by the pass criterion) is; empty when none.
  std::string worst_output;
  size_t worst_index = 0;
  // Why it failed: a mismatch in names/types/shapes, an integer/bool/BYTES
  // output that differs, or the worst floating-point element.
  std::string detail;
};

// Compares outputs pairwise (same order, same names, types and shapes).
// Floating-point elements (FP16, BF16, FP32, FP64) pass when
// |actual - expected| <= tolerance * max(1, |expected|): absolute near zero,
// relative for large values. Other types must match exactly.
NumericalReport CompareOutputs(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected,
                               double tolerance);

// Top-1 agreement of a floating-point output with a class dimension: its
// rows are all but the last dimension, the classes the last one (rank >= 2,
// last dimension > 1). nullopt when the output has no class dimension or the
// two tensors differ in type or shape.
struct Top1Agreement {
  size_t agreeing = 0;
  size_t rows = 0;
};
std::optional<Top1Agreement> CompareTop1(const Tensor& actual, const Tensor& expected);

// One output against its counterpart in another answer, as the shadow
// comparison (serving/ShadowComparison.h) and the reference check at load
// (repository/ReferenceCheck.h) look at each output.
struct OutputComparison {
  NumericalReport report;             // as CompareOutputs({actual}, {expected}, tolerance), without copies
  std::optional<Top1Agreement> top1;  // CompareTop1(actual, expected)
  // Names, types, shapes or non-floating values differ (report.detail says which).
  bool structural() const { return !report.passed && report.worst_output.empty(); }
  // An element beyond the tolerance, a structural difference, or a row whose top-1 class differs.
  bool mismatch() const { return !report.passed || (top1 && top1->agreeing < top1->rows); }
};
OutputComparison CompareOutput(const Tensor& actual, const Tensor& expected, double tolerance);

// One output's figures over several comparisons.
struct OutputTally {
  double max_abs = 0.0;
  double max_rel = 0.0;
  bool has_classes = false;  // some comparison had a class dimension: `top1` applies
  Top1Agreement top1;        // summed over those comparisons
  void Add(const OutputComparison& c);
};

// "max abs error 1.2e-05, max rel error 3.4e-06 (output 'y' element 17)"
std::string DescribeReport(const NumericalReport& report);

}  // namespace ortserve
