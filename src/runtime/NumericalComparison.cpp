#include "runtime/NumericalComparison.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace ortserve {
namespace {

bool IsFloating(DataType t) {
  return t == DataType::kFp16 || t == DataType::kBf16 || t == DataType::kFp32 || t == DataType::kFp64;
}

double ElementAt(const std::byte* data, DataType type, size_t i) {
  switch (type) {
    case DataType::kFp16: {
      uint16_t h;
      std::memcpy(&h, data + i * 2, 2);
      return HalfToFloat(h);
    }
    case DataType::kBf16: {
      uint16_t b;
      std::memcpy(&b, data + i * 2, 2);
      return Bf16ToFloat(b);
    }
    case DataType::kFp32: {
      float f;
      std::memcpy(&f, data + i * 4, 4);
      return f;
    }
    default: {
      double d;
      std::memcpy(&d, data + i * 8, 8);
      return d;
    }
  }
}

void Fail(NumericalReport& report, std::string why) {
  report.passed = false;
  if (report.detail.empty()) report.detail = std::move(why);
}

// Output #k of both sides into `report`; `worst_score` (error over allowed
// error of the worst element so far, -1 for none) carries across outputs.
void ComparePair(size_t k, const Tensor& a, const Tensor& e, double tolerance, NumericalReport& report,
                 double& worst_score) {
  if (a.name != e.name || a.dtype != e.dtype || a.shape != e.shape) {
    Fail(report, fmt::format("output #{} is '{}' {} {}, reference '{}' {} {}", k, a.name, DataTypeName(a.dtype),
                             ShapeToString(a.shape), e.name, DataTypeName(e.dtype), ShapeToString(e.shape)));
    return;
  }
  if (a.data.size() != e.data.size()) {
    Fail(report, fmt::format("output '{}' has {} bytes, reference {}", a.name, a.data.size(), e.data.size()));
    return;
  }
  if (!IsFloating(a.dtype)) {
    if (a.data.size() != 0 && std::memcmp(a.data.data(), e.data.data(), a.data.size()) != 0)
      Fail(report, fmt::format("output '{}' ({}) differs from the reference", a.name, DataTypeName(a.dtype)));
    return;
  }
  const size_t n = a.data.size() / DataTypeSize(a.dtype);
  for (size_t i = 0; i < n; ++i) {
    const double x = ElementAt(a.data.data(), a.dtype, i);
    const double y = ElementAt(e.data.data(), e.dtype, i);
    double abs_err = 0.0;
    if (std::isnan(x) || std::isnan(y)) {
      abs_err = (std::isnan(x) && std::isnan(y)) ? 0.0 : std::numeric_limits<double>::infinity();
    } else if (x != y) {  // equal infinities compare equal
      abs_err = std::fabs(x - y);
    }
    // Relative error only where the relative criterion applies (|y| >= 1);
    // near zero a relative number says nothing.
    const double rel_err = (abs_err == 0.0 || !(std::fabs(y) >= 1.0)) ? 0.0 : abs_err / std::fabs(y);
    report.max_abs_error = std::max(report.max_abs_error, abs_err);
    report.max_rel_error = std::max(report.max_rel_error, rel_err);
    const double allowed = tolerance * std::max(1.0, std::isnan(y) ? 1.0 : std::fabs(y));
    const double score = abs_err / allowed;  // inf when allowed is 0 and the values differ
    if (abs_err > 0.0 && score > worst_score) {
      worst_score = score;
      report.worst_output = a.name;
      report.worst_index = i;
      if (!(abs_err <= allowed)) {
        report.passed = false;
        report.detail = fmt::format("output '{}' element {}: {} vs reference {} (tolerance {})", a.name,
                                    i, x, y, tolerance);
      }
    }
  }
}

}  // namespace

NumericalReport CompareOutputs(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected,
                               double tolerance) {
  NumericalReport report;
  if (actual.size() != expected.size()) {
    Fail(report, fmt::format("{} outputs, reference has {}", actual.size(), expected.size()));
    return report;
  }
  double worst_score = -1.0;
  for (size_t k = 0; k < actual.size(); ++k) ComparePair(k, actual[k], expected[k], tolerance, report, worst_score);
  return report;
}

std::optional<Top1Agreement> CompareTop1(const Tensor& actual, const Tensor& expected) {
  if (!IsFloating(actual.dtype) || actual.dtype != expected.dtype || actual.shape != expected.shape ||
      actual.shape.size() < 2 || actual.shape.back() <= 1 || actual.data.size() != expected.data.size()) {
    return std::nullopt;
  }
  const size_t classes = static_cast<size_t>(actual.shape.back());
  Top1Agreement out;
  out.rows = actual.data.size() / DataTypeSize(actual.dtype) / classes;
  auto argmax = [classes](const Tensor& t, size_t row) {
    size_t best = 0;
    double best_value = -std::numeric_limits<double>::infinity();
    for (size_t c = 0; c < classes; ++c) {
      const double v = ElementAt(t.data.data(), t.dtype, row * classes + c);
      if (v > best_value) {  // NaN never wins; ties go to the first class
        best_value = v;
        best = c;
      }
    }
    return best;
  };
  for (size_t r = 0; r < out.rows; ++r) out.agreeing += argmax(actual, r) == argmax(expected, r) ? 1 : 0;
  return out;
}

OutputComparison CompareOutput(const Tensor& actual, const Tensor& expected, double tolerance) {
  OutputComparison out{.report = {}, .top1 = CompareTop1(actual, expected)};
  double worst_score = -1.0;
  ComparePair(0, actual, expected, tolerance, out.report, worst_score);
  return out;
}

void OutputTally::Add(const OutputComparison& c) {
  max_abs = std::max(max_abs, c.report.max_abs_error);
  max_rel = std::max(max_rel, c.report.max_rel_error);
  if (!c.top1) return;
  has_classes = true;
  top1.agreeing += c.top1->agreeing;
  top1.rows += c.top1->rows;
}

std::string DescribeReport(const NumericalReport& report) {
  std::string out = fmt::format("max abs error {:.3g}, max rel error {:.3g}", report.max_abs_error,
                                report.max_rel_error);
  if (!report.worst_output.empty())
    out += fmt::format(" (worst: output '{}' element {})", report.worst_output, report.worst_index);
  if (!report.passed) out += ": " + report.detail;
  return out;
}

}  // namespace ortserve
