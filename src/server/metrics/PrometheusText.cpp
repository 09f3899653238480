#include "server/metrics/PrometheusText.h"

#include <charconv>
#include <cmath>

namespace ortserve::metrics {

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  std::to_chars_result r;
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    r = std::to_chars(buf, buf + sizeof(buf), static_cast<int64_t>(value));
  } else {
    // As Go's client writes them (strconv 'g', shortest): fixed notation for
    // 1e-4 <= |v| < 1e21, else an exponent; so le="0.0001", le="5e-05".
    const double magnitude = std::fabs(value);
    r = std::to_chars(buf, buf + sizeof(buf), value,
                      magnitude >= 1e-4 && magnitude < 1e21 ? std::chars_format::fixed
                                                            : std::chars_format::scientific);
  }
  return std::string(buf, r.ptr);
}

void PrometheusText::Family(std::string_view name, std::string_view type, std::string_view help) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += EscapeHelp(help);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

void PrometheusText::Head(std::string_view name, const Labels& labels, std::string_view extra_name,
                          std::string_view extra_value) {
  out_ += name;
  if (labels.empty() && extra_name.empty()) {
    out_ += ' ';
    return;
  }
  out_ += '{';
  bool first = true;
  auto label = [&](std::string_view key, std::string_view value) {
    if (!first) out_ += ',';
    first = false;
    out_ += key;
    out_ += "=\"";
    out_ += EscapeLabelValue(value);
    out_ += '"';
  };
  for (const auto& [key, value] : labels) label(key, value);
  if (!extra_name.empty()) label(extra_name, extra_value);
  out_ += "} ";
}

void PrometheusText::Sample(std::string_view name, const Labels& labels, double value) {
  Head(name, labels);
  out_ += FormatValue(value);
  out_ += '\n';
}

void PrometheusText::Sample(std::string_view name, const Labels& labels, uint64_t value) {
  Head(name, labels);
  out_ += std::to_string(value);
  out_ += '\n';
}

void PrometheusText::HistogramSamples(std::string_view name, const Labels& labels,
                                      const Histogram::Snapshot& snapshot, double divisor) {
  const std::string bucket = std::string(name) + "_bucket";
  for (size_t i = 0; i < snapshot.upper_bounds.size(); ++i) {
    Head(bucket, labels, "le", FormatValue(static_cast<double>(snapshot.upper_bounds[i]) / divisor));
    out_ += std::to_string(snapshot.cumulative[i]);
    out_ += '\n';
  }
  Head(bucket, labels, "le", "+Inf");
  out_ += std::to_string(snapshot.count);
  out_ += '\n';
  Sample(std::string(name) + "_sum", labels, static_cast<double>(snapshot.sum) / divisor);
  Sample(std::string(name) + "_count", labels, snapshot.count);
}

}  // namespace ortserve::metrics
