// The keys this process holds for its model providers, and the host's rule
// that no action carries one anywhere (seed I1 step 5, I6).
//
// The dispatcher skill blocks what looks like a secret; it cannot know the
// exact keys the daemon was configured with (handing them to a skill would
// be a leak of its own), and its check holds only while it is loaded. So the
// host checks every verification itself, before any gate, against the keys
// it was given: an action that contains one, in any string, is blocked by
// the host's "credential-rule" (verifier.hpp; trace version "host"), whichever skills are loaded.
// The same keys are masked in the gate log, the session transcripts and the
// prompts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "value/value.hpp"

namespace passepartout {

// A key and where it came from ("OPENAI_API_KEY", "key file /etc/...") for
// the block's reason, which never shows the key itself.
struct KnownCredential {
  std::string secret;
  std::string origin;
};

// Keys shorter than this are not checked: they would match ordinary text.
inline constexpr std::size_t kMinCredentialLength = 8;

class KnownCredentials {
 public:
  // Replaces the set (the daemon, at start, with every configured
  // provider's key). Keys shorter than kMinCredentialLength are ignored.
  // Any thread; meant for start-up: a replaced set is kept until the process
  // ends, so a reader never holds a dangling one.
  static void set(std::vector<KnownCredential> credentials);
  // True when there is none (the common case of a scripted or local model).
  static bool empty() noexcept;
  // The origin of the first key found in any string of `value` (keywords
  // and symbols too), or nullptr.
  static const std::string* found_in(const Value& value);
  // The origin of the first key found in `text`, or nullptr.
  static const std::string* found_in(std::string_view text);
  // `text` with every known key replaced by "[MASKED]".
  static std::string masked(std::string_view text);
  // Masks every known key in `text` in place; false when there was none.
  static bool mask(std::string& text);
};

}  // namespace passepartout
