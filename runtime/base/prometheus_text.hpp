// PrometheusText: writes metrics in the Prometheus text exposition format
// (version 0.0.4, what `/metrics` serves): HELP and TYPE lines, samples with
// escaped label values, and histograms with cumulative buckets.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace passepartout {

// One label of a sample. Names are the caller's constants ([a-zA-Z_][a-zA-Z0-9_]*);
// values may hold anything and are escaped.
struct MetricLabel {
  std::string_view name;
  std::string_view value;
};

// Builds one exposition. Families are written one after another: family()
// opens one (its HELP and TYPE lines), then its samples follow. A family
// must be opened once per exposition and its samples written together, as
// the format requires. Not thread-safe: one writer per scrape.
class PrometheusText {
 public:
  enum class Type { counter, gauge, summary, histogram };

  // The content type to serve the text with.
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

  // `name` is the family's name (a counter's ends in _total); `help` is one
  // line of plain text (a backslash or newline in it is escaped).
  void family(std::string_view name, Type type, std::string_view help);

  // One sample: `name` is the family's, or a summary's name with _sum or _count.
  void sample(std::string_view name, std::span<const MetricLabel> labels, double value);
  void sample(std::string_view name, std::span<const MetricLabel> labels, std::uint64_t value);
  void sample(std::string_view name, std::initializer_list<MetricLabel> labels, double value) {
    sample(name, std::span<const MetricLabel>(labels.begin(), labels.size()), value);
  }
  void sample(std::string_view name, std::initializer_list<MetricLabel> labels, std::uint64_t value) {
    sample(name, std::span<const MetricLabel>(labels.begin(), labels.size()), value);
  }

  // A histogram's series for one label set: `bucket_counts` holds the
  // observations in each bucket alone (not cumulative), one per upper bound
  // in `upper_bounds` (increasing) and a last one for those above them all;
  // written as cumulative name_bucket{le=...} lines ending with le="+Inf",
  // then name_sum and name_count (the +Inf bucket's value).
  void histogram(std::string_view name, std::span<const MetricLabel> labels, std::span<const double> upper_bounds,
                 std::span<const std::uint64_t> bucket_counts, double sum);

  const std::string& text() const noexcept { return text_; }
  std::string take() noexcept { return std::move(text_); }

 private:
  void begin_sample(std::string_view name, std::span<const MetricLabel> labels, const MetricLabel* extra);
  std::string text_;
};

// A label value as the format writes it between quotes: \ as \\, " as \",
// a newline as \n.
std::string escape_label_value(std::string_view value);

// A number as the format writes it: +Inf, -Inf, NaN, or the shortest text
// that reads back as the same double.
std::string format_metric_value(double value);

}  // namespace passepartout
