// PrometheusText: the text exposition format's escaping, families and histograms.
#include <catch2/catch.hpp>

#include <array>
#include <limits>

#include "base/prometheus_text.hpp"

namespace passepartout {
namespace {

TEST_CASE("prometheus text escapes backslash, quote and newline in label values", "[metrics]") {
  CHECK(escape_label_value("plain") == "plain");
  CHECK(escape_label_value("a\\b") == "a\\\\b");
  CHECK(escape_label_value("say \"hi\"") == "say \\\"hi\\\"");
  CHECK(escape_label_value("two\nlines") == "two\\nlines");
  PrometheusText text;
  text.sample("x_total", {{"skill", "we\"ird\\\n"}}, std::uint64_t{3});
  CHECK(text.text() == "x_total{skill=\"we\\\"ird\\\\\\n\"} 3\n");
}

TEST_CASE("prometheus text writes HELP and TYPE before a family's samples", "[metrics]") {
  PrometheusText text;
  text.family("passepartout_signals_total", PrometheusText::Type::counter, "Signals, by \\ sensor\nand outcome.");
  text.sample("passepartout_signals_total", {{"sensor", "user-input"}, {"outcome", "done"}}, std::uint64_t{7});
  text.family("passepartout_skills_loaded", PrometheusText::Type::gauge, "Skills \"loaded\".");
  text.sample("passepartout_skills_loaded", {}, std::uint64_t{4});
  CHECK(text.text() ==
        "# HELP passepartout_signals_total Signals, by \\\\ sensor\\nand outcome.\n"
        "# TYPE passepartout_signals_total counter\n"
        "passepartout_signals_total{sensor=\"user-input\",outcome=\"done\"} 7\n"
        "# HELP passepartout_skills_loaded Skills \"loaded\".\n"
        "# TYPE passepartout_skills_loaded gauge\n"
        "passepartout_skills_loaded 4\n");
}

TEST_CASE("prometheus text writes special and fractional values", "[metrics]") {
  CHECK(format_metric_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(format_metric_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(format_metric_value(std::numeric_limits<double>::quiet_NaN()) == "NaN");
  CHECK(format_metric_value(0.25) == "0.25");
  CHECK(format_metric_value(1e-06) == "1e-06");
  CHECK(format_metric_value(3.0) == "3");
}

TEST_CASE("prometheus histogram buckets are cumulative and end with +Inf, _sum and _count", "[metrics]") {
  PrometheusText text;
  const std::array bounds{0.1, 1.0, 10.0};
  const std::array<std::uint64_t, 4> counts{2, 0, 3, 1};
  const std::array labels{MetricLabel{"provider", "ollama"}};
  text.family("passepartout_provider_call_duration_seconds", PrometheusText::Type::histogram, "Latency.");
  text.histogram("passepartout_provider_call_duration_seconds", labels, bounds, counts, 42.5);
  CHECK(text.text() ==
        "# HELP passepartout_provider_call_duration_seconds Latency.\n"
        "# TYPE passepartout_provider_call_duration_seconds histogram\n"
        "passepartout_provider_call_duration_seconds_bucket{provider=\"ollama\",le=\"0.1\"} 2\n"
        "passepartout_provider_call_duration_seconds_bucket{provider=\"ollama\",le=\"1\"} 2\n"
        "passepartout_provider_call_duration_seconds_bucket{provider=\"ollama\",le=\"10\"} 5\n"
        "passepartout_provider_call_duration_seconds_bucket{provider=\"ollama\",le=\"+Inf\"} 6\n"
        "passepartout_provider_call_duration_seconds_sum{provider=\"ollama\"} 42.5\n"
        "passepartout_provider_call_duration_seconds_count{provider=\"ollama\"} 6\n");
}

TEST_CASE("prometheus histogram without labels labels its buckets with le alone", "[metrics]") {
  PrometheusText text;
  const std::array bounds{1.0};
  const std::array<std::uint64_t, 2> counts{0, 0};
  text.histogram("h_seconds", {}, bounds, counts, 0.0);
  CHECK(text.text() ==
        "h_seconds_bucket{le=\"1\"} 0\nh_seconds_bucket{le=\"+Inf\"} 0\nh_seconds_sum 0\nh_seconds_count 0\n");
}

}  // namespace
}  // namespace passepartout
