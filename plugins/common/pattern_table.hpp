// A table of named regular expressions, compiled once and matched in one
// linear-time pass (RE2::Set), for the bundled skills that check text against
// many patterns (dispatcher, shell-guard). Immutable after construction: RE2
// and RE2::Set match from any number of threads at once, so a gate needs no lock.
#pragma once

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace passepartout::bundled {

// Options for every pattern of a bundled skill: a pattern that does not
// compile is reported through an exception, not on stderr.
inline RE2::Options pattern_options() {
  RE2::Options options;
  options.set_log_errors(false);
  return options;
}

struct PatternSpec {
  std::string name;   // for the log, the verdict's reason and the README
  std::string regex;  // RE2 syntax
};

class PatternTable {
 public:
  // Compiles every pattern. Throws std::invalid_argument naming the pattern
  // that does not compile, std::runtime_error when the set does not fit in
  // RE2's memory budget.
  explicit PatternTable(std::vector<PatternSpec> specs) : set_(pattern_options(), RE2::UNANCHORED) {
    for (PatternSpec& spec : specs) {
      auto regex = std::make_unique<RE2>(spec.regex, pattern_options());
      std::string error;
      if (!regex->ok() || set_.Add(spec.regex, &error) != static_cast<int>(patterns_.size())) {
        throw std::invalid_argument("pattern '" + spec.name + "': invalid regex '" + spec.regex +
                                    "': " + (regex->ok() ? error : regex->error()));
      }
      patterns_.push_back({std::move(spec.name), std::move(regex)});
    }
    if (!set_.Compile()) throw std::runtime_error("patterns: out of memory compiling the pattern set");
  }

  std::size_t size() const noexcept { return patterns_.size(); }
  const std::string& name(std::size_t index) const { return patterns_.at(index).name; }

  // The indices of every pattern found in `text`, in table order.
  std::vector<std::size_t> matches(std::string_view text) const {
    const re2::StringPiece piece(text.data(), text.size());
    RE2::Set::ErrorInfo error{RE2::Set::kNoError};
    // Most text matches nothing: asking only whether anything matches
    // collects no indices and allocates nothing.
    if (!set_.Match(piece, nullptr, &error) && error.kind == RE2::Set::kNoError) return {};
    std::vector<int> matched;
    error.kind = RE2::Set::kNoError;
    if (!set_.Match(piece, &matched, &error) && error.kind == RE2::Set::kNoError) return {};
    std::vector<std::size_t> found;
    if (error.kind != RE2::Set::kNoError) {
      // The set's DFA gave up (out of memory on huge text): RE2 alone falls
      // back to slower engines, so match one pattern at a time.
      for (std::size_t i = 0; i < patterns_.size(); ++i) {
        if (RE2::PartialMatch(piece, *patterns_[i].regex)) found.push_back(i);
      }
      return found;
    }
    found.assign(matched.begin(), matched.end());
    std::sort(found.begin(), found.end());
    return found;
  }

  // The name of the first pattern (in table order) found in `text`, or "".
  std::string_view first_match(std::string_view text) const {
    const std::vector<std::size_t> found = matches(text);
    return found.empty() ? std::string_view() : std::string_view(patterns_[found.front()].name);
  }

 private:
  struct Pattern {
    std::string name;
    std::unique_ptr<RE2> regex;  // RE2 is neither copyable nor movable
  };

  std::vector<Pattern> patterns_;
  RE2::Set set_;  // the same patterns, index for index
};

}  // namespace passepartout::bundled
