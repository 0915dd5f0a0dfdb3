// The pure parts of a fleet's rollout: statements, checks, stages, canaries, the rule.
#include "daemon/fleet_rollout.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <utility>

#include "base/digest.hpp"

namespace passepartout {

namespace {

std::string per_thousand(std::uint64_t part, std::uint64_t whole) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f",
                whole == 0 ? 0.0 : 1000.0 * static_cast<double>(part) / static_cast<double>(whole));
  return text;
}

std::string limit_text(double limit) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", limit);
  return text;
}

bool over(std::uint64_t part, std::uint64_t whole, double limit) {
  return whole > 0 && 1000.0 * static_cast<double>(part) / static_cast<double>(whole) > limit;
}

}  // namespace

std::string release_statement(std::string_view name, std::string_view version, std::string_view manifest_sha256,
                              std::string_view library_sha256) {
  std::string text = "passepartout release 1\n";
  for (const std::string_view part : {name, version, manifest_sha256, library_sha256}) {
    text += part;
    text += '\n';
  }
  return text;
}

std::optional<ReleaseRefusal> check_release(const FleetRelease& release, std::string_view trusted_key) {
  if (const std::string got = sha256_hex(release.library); got != release.library_sha256) {
    return ReleaseRefusal{"digest",
                          "the library's SHA-256 is " + got + ", not the published " + release.library_sha256};
  }
  if (const std::string got = sha256_hex(release.manifest); got != release.manifest_sha256) {
    return ReleaseRefusal{"digest",
                          "the manifest's SHA-256 is " + got + ", not the published " + release.manifest_sha256};
  }
  if (trusted_key.empty()) return std::nullopt;
  if (release.signature.empty()) {
    return ReleaseRefusal{"signature", "the release is not signed, and this node trusts only releases signed by " +
                                           std::string(trusted_key.substr(0, 16)) + "..."};
  }
  const std::string statement =
      release_statement(release.name, release.version, release.manifest_sha256, release.library_sha256);
  if (!ed25519_verify(trusted_key, statement, release.signature)) {
    return ReleaseRefusal{"signature", "the signature is not the trusted key's (" +
                                           std::string(trusted_key.substr(0, 16)) + "...) over this release"};
  }
  return std::nullopt;
}

std::string RolloutStage::text() const { return shadow ? "shadow" : std::to_string(percent) + "%"; }

Result<std::vector<RolloutStage>> parse_rollout_stages(std::string_view text) {
  std::vector<RolloutStage> stages;
  const auto bad = [&](const std::string& why) {
    return fail(ErrorCode::invalid_input,
                "--stages '" + std::string(text) + "': " + why + " (for instance shadow,10%,100%)");
  };
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view part = text.substr(at, comma - at);
    at = comma + 1;
    RolloutStage stage;
    if (part == "shadow") {
      if (!stages.empty()) return bad("shadow can only be the first stage");
      stage.shadow = true;
    } else {
      int percent = 0;
      const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), percent);
      if (ec != std::errc() || end + 1 != part.data() + part.size() || *end != '%' || percent < 1 || percent > 100) {
        return bad("'" + std::string(part) + "' is neither shadow nor a share from 1% to 100%");
      }
      if (!stages.empty() && !stages.back().shadow && stages.back().percent >= percent) {
        return bad("each share must be larger than the one before");
      }
      stage.percent = percent;
    }
    stages.push_back(stage);
    if (comma == text.size()) break;
  }
  if (stages.empty() || stages.back().shadow || stages.back().percent != 100) return bad("the last stage must be 100%");
  return stages;
}

std::vector<std::string> canary_nodes(const std::vector<std::string>& alive, std::string_view rollout_key,
                                      int percent) {
  std::vector<std::pair<std::string, std::string>> ranked;
  ranked.reserve(alive.size());
  for (const std::string& node : alive) {
    ranked.emplace_back(sha256_hex(std::string(rollout_key) + '\n' + node), node);
  }
  std::sort(ranked.begin(), ranked.end());
  const std::size_t n = alive.size();
  const std::size_t take = std::min(n, (static_cast<std::size_t>(percent) * n + 99) / 100);
  std::vector<std::string> chosen;
  for (std::size_t i = 0; i < take; ++i) chosen.push_back(ranked[i].second);
  return chosen;
}

RolloutVerdict judge_rollout(const RolloutFigures& rollout, const std::vector<std::string>& alive,
                             const std::vector<RolloutReport>& reports) {
  using Kind = RolloutVerdict::Kind;
  if (rollout.stage >= rollout.stages.size()) return {Kind::done, "every stage was passed"};
  const RolloutStage& stage = rollout.stages[rollout.stage];
  std::uint64_t verifications = 0;
  std::uint64_t disagreements = 0;
  std::uint64_t failures = 0;
  std::uint64_t blocks = 0;
  std::size_t reported = 0;
  for (const RolloutReport& report : reports) {
    if (report.state == "refused") {
      return {Kind::halt, "node " + report.node + " refused the release at its " + report.step + ": " + report.error};
    }
    if (std::find(alive.begin(), alive.end(), report.node) == alive.end()) continue;
    ++reported;
    if (stage.shadow && report.state == "shadowing") {
      verifications += report.verifications;
      disagreements += report.disagreements;
    } else if (!stage.shadow && report.state == "live") {
      verifications += report.verifications;
      failures += report.failures;
      blocks += report.blocks;
    }
  }
  const std::string where = "stage " + std::to_string(rollout.stage + 1) + " (" + stage.text() + ")";
  if (stage.shadow && over(disagreements, verifications, rollout.max_disagreements)) {
    return {Kind::halt, where + ": the candidate disagreed with the live gate in " + std::to_string(disagreements) +
                            " of " + std::to_string(verifications) + " verifications (" +
                            per_thousand(disagreements, verifications) + " per thousand, at most " +
                            limit_text(rollout.max_disagreements) + " allowed)"};
  }
  if (!stage.shadow) {
    if (over(failures, verifications, rollout.max_failures)) {
      return {Kind::halt, where + ": the release's gate failed " + std::to_string(failures) + " of " +
                              std::to_string(verifications) + " verifications on the nodes running it (" +
                              per_thousand(failures, verifications) + " per thousand, at most " +
                              limit_text(rollout.max_failures) + " allowed)"};
    }
    if (over(blocks, verifications, rollout.max_blocks)) {
      return {Kind::halt, where + ": the release's gate blocked " + std::to_string(blocks) + " of " +
                              std::to_string(verifications) + " verifications on the nodes running it (" +
                              per_thousand(blocks, verifications) + " per thousand, at most " +
                              limit_text(rollout.max_blocks) + " allowed)"};
    }
  }
  if (rollout.stage_ms < rollout.dwell_ms) return {Kind::hold, where + ": dwelling"};
  if (reported < alive.size()) {
    return {Kind::hold, where + ": " + std::to_string(alive.size() - reported) + " node(s) have not reported yet"};
  }
  if (verifications < rollout.min_verifications) {
    return {Kind::hold, where + ": " + std::to_string(verifications) + " of the " +
                            std::to_string(rollout.min_verifications) + " verifications it needs"};
  }
  const std::string figures =
      std::to_string(verifications) + " verifications, " +
      (stage.shadow ? std::to_string(disagreements) + " disagreements"
                    : std::to_string(failures) + " failures, " + std::to_string(blocks) + " blocks");
  if (rollout.stage + 1 == rollout.stages.size()) return {Kind::done, where + " held: " + figures};
  return {Kind::advance, where + " held: " + figures};
}

}  // namespace passepartout
