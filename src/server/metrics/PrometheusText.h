#pragma once
// Writes the Prometheus text exposition format 0.0.4: one "# HELP" and one
// "# TYPE" line per family, then its samples, label values escaped. Callers
// write every sample of a family right after its Family() call (the format
// requires a family's samples to be contiguous).
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/Histogram.h"

namespace ortserve::metrics {

inline constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

using Labels = std::vector<std::pair<std::string_view, std::string_view>>;

// Backslash, double quote and line feed escaped as \\, \" and \n.
std::string EscapeLabelValue(std::string_view value);
// Backslash and line feed escaped (HELP text).
std::string EscapeHelp(std::string_view help);
// A sample value: integers exactly, others in the shortest form that reads
// back to the same double; +Inf, -Inf, NaN as Prometheus spells them.
std::string FormatValue(double value);

class PrometheusText {
 public:
  // type: "counter", "gauge", "histogram" or "untyped".
  void Family(std::string_view name, std::string_view type, std::string_view help);
  void Sample(std::string_view name, const Labels& labels, double value);
  void Sample(std::string_view name, const Labels& labels, uint64_t value);
  // name_bucket{...,le="..."} cumulative counts (+Inf last), name_sum and
  // name_count. Values are divided by `divisor` (1e9: ns to seconds).
  void HistogramSamples(std::string_view name, const Labels& labels, const Histogram::Snapshot& snapshot,
                        double divisor);

  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void Head(std::string_view name, const Labels& labels, std::string_view extra_name = {},
            std::string_view extra_value = {});
  std::string out_;
};

}  // namespace ortserve::metrics
