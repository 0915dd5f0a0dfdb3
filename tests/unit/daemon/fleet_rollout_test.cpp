// The pure parts of a fleet's rollout: Ed25519 (RFC 8032's first test
// vector), the checks a node makes on a release, the stages, the canaries,
// and the rule that holds, advances or halts a rollout.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "base/digest.hpp"
#include "daemon/fleet_rollout.hpp"

using namespace passepartout;

namespace {

FleetRelease release_of(const std::string& library, const std::string& key = {}) {
  FleetRelease r;
  r.name = "shadow-gate";
  r.version = "2.0.0";
  r.manifest = "name: shadow-gate\nversion: 2.0.0\nlibrary: libshadow-gate-2.so\nabi: 1\n";
  r.library = library;
  r.manifest_sha256 = sha256_hex(r.manifest);
  r.library_sha256 = sha256_hex(r.library);
  if (!key.empty())
    r.signature = ed25519_sign(key, release_statement(r.name, r.version, r.manifest_sha256, r.library_sha256));
  return r;
}

RolloutFigures figures(const std::string& stages, std::size_t stage) {
  RolloutFigures f;
  f.stages = *parse_rollout_stages(stages);
  f.stage = stage;
  f.stage_ms = 5000;
  f.dwell_ms = 1000;
  f.min_verifications = 10;
  f.max_disagreements = 0;
  f.max_failures = 1;
  f.max_blocks = 1000;
  return f;
}

RolloutReport report(const std::string& node, const std::string& state, std::uint64_t verifications,
                     std::uint64_t disagreements = 0, std::uint64_t failures = 0) {
  RolloutReport r;
  r.node = node;
  r.state = state;
  r.verifications = verifications;
  r.disagreements = disagreements;
  r.failures = failures;
  return r;
}

const std::vector<std::string> kAlive{"node-a", "node-b", "node-c"};

}  // namespace

TEST_CASE("Ed25519 signs and verifies as RFC 8032 says", "[daemon][fleet][rollout]") {
  const std::string secret = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
  const std::string pub = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
  const std::string signature =
      "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bb"
      "e24655141438e7a100b";
  CHECK(ed25519_public_key(secret) == pub);
  CHECK(ed25519_sign(secret, "") == signature);
  CHECK(ed25519_verify(pub, "", signature));
  CHECK_FALSE(ed25519_verify(pub, "x", signature));
  CHECK_FALSE(ed25519_verify(pub, "", "00" + signature.substr(2)));
  CHECK_FALSE(ed25519_verify("zz", "", signature));
  CHECK(ed25519_public_key("not hex").empty());
  const std::string fresh = ed25519_private_key();
  CHECK(fresh.size() == 64);
  CHECK(ed25519_verify(ed25519_public_key(fresh), "m", ed25519_sign(fresh, "m")));
}

TEST_CASE("a node refuses a release whose digests or signature do not check", "[daemon][fleet][rollout]") {
  const std::string key = ed25519_private_key();
  const std::string trusted = ed25519_public_key(key);
  CHECK_FALSE(check_release(release_of("bytes"), "").has_value());  // no key: the digests alone
  CHECK_FALSE(check_release(release_of("bytes", key), trusted).has_value());

  FleetRelease tampered = release_of("bytes", key);
  tampered.library = "other bytes";
  auto refused = check_release(tampered, "");
  REQUIRE(refused.has_value());
  CHECK(refused->step == "digest");
  CHECK(refused->error.find(tampered.library_sha256) != std::string::npos);

  FleetRelease manifest_changed = release_of("bytes", key);
  manifest_changed.manifest += "priority: 1\n";
  CHECK(check_release(manifest_changed, trusted)->step == "digest");

  auto unsigned_release = check_release(release_of("bytes"), trusted);
  REQUIRE(unsigned_release.has_value());
  CHECK(unsigned_release->step == "signature");
  CHECK(unsigned_release->error.find("not signed") != std::string::npos);

  auto other_key = check_release(release_of("bytes", ed25519_private_key()), trusted);
  REQUIRE(other_key.has_value());
  CHECK(other_key->step == "signature");

  // The signature covers the version too: the same bytes under another version do not pass.
  FleetRelease renamed = release_of("bytes", key);
  renamed.version = "2.0.1";
  CHECK(check_release(renamed, trusted)->step == "signature");
}

TEST_CASE("rollout stages are a first shadow, rising shares, and 100% last", "[daemon][fleet][rollout]") {
  auto stages = parse_rollout_stages("shadow,10%,100%");
  REQUIRE(stages.has_value());
  REQUIRE(stages->size() == 3);
  CHECK((*stages)[0].shadow);
  CHECK((*stages)[1].percent == 10);
  CHECK((*stages)[2].text() == "100%");
  CHECK(parse_rollout_stages("100%").has_value());
  for (const char* bad : {"", "shadow", "10%", "50%,10%,100%", "10%,shadow,100%", "0%,100%", "101%", "ten%,100%",
                          "10,100%", "shadow,,100%"}) {
    INFO(bad);
    auto parsed = parse_rollout_stages(bad);
    REQUIRE_FALSE(parsed.has_value());
    CHECK(parsed.error().message.find("for instance shadow,10%,100%") != std::string::npos);
  }
}

TEST_CASE("canaries are the same set on every node, and a share only grows", "[daemon][fleet][rollout]") {
  std::vector<std::string> nodes;
  for (int i = 0; i < 20; ++i) nodes.push_back("node-" + std::to_string(i));
  const auto ten = canary_nodes(nodes, "skill@2.0.0", 10);
  const auto half = canary_nodes(nodes, "skill@2.0.0", 50);
  CHECK(ten.size() == 2);
  CHECK(half.size() == 10);
  for (const std::string& node : ten) CHECK(std::find(half.begin(), half.end(), node) != half.end());
  std::vector<std::string> shuffled(nodes.rbegin(), nodes.rend());
  CHECK(canary_nodes(shuffled, "skill@2.0.0", 10) == ten);     // whatever order the nodes are read in
  CHECK(canary_nodes(kAlive, "skill@2.0.0", 10).size() == 1);  // at least one of a small fleet
  CHECK(canary_nodes(kAlive, "skill@2.0.0", 100).size() == 3);
  CHECK(canary_nodes(nodes, "other@1.0.0", 10) != ten);  // another release, other canaries (almost surely)
}

TEST_CASE("a rollout holds, advances, finishes or halts by what the nodes report", "[daemon][fleet][rollout]") {
  using Kind = RolloutVerdict::Kind;
  const std::vector<RolloutReport> shadowing{report("node-a", "shadowing", 5), report("node-b", "shadowing", 5),
                                             report("node-c", "shadowing", 5)};
  CHECK(judge_rollout(figures("shadow,34%,100%", 0), kAlive, shadowing).kind == Kind::advance);

  RolloutFigures dwelling = figures("shadow,34%,100%", 0);
  dwelling.stage_ms = 10;
  CHECK(judge_rollout(dwelling, kAlive, shadowing).kind == Kind::hold);

  const std::vector<RolloutReport> two{shadowing[0], shadowing[1]};
  const RolloutVerdict waiting = judge_rollout(figures("shadow,34%,100%", 0), kAlive, two);
  CHECK(waiting.kind == Kind::hold);
  CHECK(waiting.why.find("1 node(s) have not reported") != std::string::npos);
  // A node that is gone is not waited for.
  CHECK(judge_rollout(figures("shadow,34%,100%", 0), {"node-a", "node-b"}, two).kind == Kind::advance);

  const std::vector<RolloutReport> few{report("node-a", "shadowing", 1), report("node-b", "shadowing", 1),
                                       report("node-c", "shadowing", 1)};
  CHECK(judge_rollout(figures("shadow,34%,100%", 0), kAlive, few).kind == Kind::hold);

  // One disagreement is too many by default, dwell or not.
  std::vector<RolloutReport> disagreeing = shadowing;
  disagreeing[1].disagreements = 1;
  const RolloutVerdict halted = judge_rollout(dwelling, kAlive, disagreeing);
  CHECK(halted.kind == Kind::halt);
  CHECK(halted.why.find("disagreed with the live gate in 1 of 15 verifications") != std::string::npos);

  const std::vector<RolloutReport> refused{report("node-b", "refused", 0)};
  CHECK(judge_rollout(dwelling, kAlive, refused).kind == Kind::halt);

  // A canary stage counts the nodes running it; the others only report.
  const std::vector<RolloutReport> canary{report("node-a", "live", 20, 0, 0), report("node-b", "kept", 0),
                                          report("node-c", "kept", 0)};
  CHECK(judge_rollout(figures("shadow,34%,100%", 1), kAlive, canary).kind == Kind::advance);
  std::vector<RolloutReport> failing = canary;
  failing[0].failures = 20;
  const RolloutVerdict rolled_back = judge_rollout(figures("shadow,34%,100%", 1), kAlive, failing);
  CHECK(rolled_back.kind == Kind::halt);
  CHECK(rolled_back.why.find("failed 20 of 20 verifications") != std::string::npos);

  const std::vector<RolloutReport> everywhere{report("node-a", "live", 10), report("node-b", "live", 10),
                                              report("node-c", "live", 10)};
  CHECK(judge_rollout(figures("shadow,34%,100%", 2), kAlive, everywhere).kind == Kind::done);
}
