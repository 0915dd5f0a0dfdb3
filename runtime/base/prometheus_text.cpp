// The Prometheus text exposition format, version 0.0.4:
// https://prometheus.io/docs/instrumenting/exposition_formats/
#include "base/prometheus_text.hpp"

#include <fmt/format.h>

#include <cassert>
#include <cmath>

namespace passepartout {
namespace {

const char* type_name(PrometheusText::Type type) {
  switch (type) {
    case PrometheusText::Type::counter:
      return "counter";
    case PrometheusText::Type::gauge:
      return "gauge";
    case PrometheusText::Type::summary:
      return "summary";
    case PrometheusText::Type::histogram:
      return "histogram";
  }
  return "untyped";
}

void append_escaped(std::string& out, std::string_view text, bool quotes) {
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  append_escaped(out, value, true);
  return out;
}

std::string format_metric_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

void PrometheusText::family(std::string_view name, Type type, std::string_view help) {
  text_ += "# HELP ";
  text_ += name;
  text_ += ' ';
  append_escaped(text_, help, false);  // HELP escapes \ and newlines, not quotes
  text_ += "\n# TYPE ";
  text_ += name;
  text_ += ' ';
  text_ += type_name(type);
  text_ += '\n';
}

void PrometheusText::begin_sample(std::string_view name, std::span<const MetricLabel> labels,
                                  const MetricLabel* extra) {
  text_ += name;
  if (labels.empty() && extra == nullptr) {
    text_ += ' ';
    return;
  }
  text_ += '{';
  bool first = true;
  auto label = [&](const MetricLabel& l) {
    if (!first) text_ += ',';
    first = false;
    text_ += l.name;
    text_ += "=\"";
    append_escaped(text_, l.value, true);
    text_ += '"';
  };
  for (const MetricLabel& l : labels) label(l);
  if (extra != nullptr) label(*extra);
  text_ += "} ";
}

void PrometheusText::sample(std::string_view name, std::span<const MetricLabel> labels, double value) {
  begin_sample(name, labels, nullptr);
  text_ += format_metric_value(value);
  text_ += '\n';
}

void PrometheusText::sample(std::string_view name, std::span<const MetricLabel> labels, std::uint64_t value) {
  begin_sample(name, labels, nullptr);
  fmt::format_to(std::back_inserter(text_), "{}\n", value);
}

void PrometheusText::histogram(std::string_view name, std::span<const MetricLabel> labels,
                               std::span<const double> upper_bounds, std::span<const std::uint64_t> bucket_counts,
                               double sum) {
  assert(bucket_counts.size() == upper_bounds.size() + 1 && "one count per bound and one above them all");
  const std::string bucket_name = std::string(name) + "_bucket";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bucket_counts.size(); ++i) {
    cumulative += bucket_counts[i];
    const std::string le = i < upper_bounds.size() ? format_metric_value(upper_bounds[i]) : std::string("+Inf");
    const MetricLabel extra{"le", le};
    begin_sample(bucket_name, labels, &extra);
    fmt::format_to(std::back_inserter(text_), "{}\n", cumulative);
  }
  sample(std::string(name) + "_sum", labels, sum);
  sample(std::string(name) + "_count", labels, cumulative);
}

}  // namespace passepartout
