// Reading a config file's `consensus:` map. Included only by the config
// reader's .cpp: it brings in yaml-cpp.
#pragma once

#include <string>
#include <vector>

#include "base/yaml_diagnostics.hpp"
#include "pipeline/consensus.hpp"

namespace passepartout {

// Reads `node` into `out`, each problem located at its line and key:
//   consensus:
//     providers: [openai, anthropic, ollama]   # who votes; default: the cascade's providers
//     quorum: 2                                # decided when 2 answers agree (default: a majority)
//     # or, first-to-ahead-by-k:
//     ahead_by: 2                              # decided when one action leads every other by 2 votes
//     max_calls: 5                             # ... or undecided after 5 calls (default: 4 * ahead_by)
//     when: acting                             # acting (default): proposals that act; always: every proposal
// `origins` gets where each of out.providers is written ("file:line:col"),
// for the caller, which knows the providers, to check them.
void read_consensus(const YAML::Node& node, YamlProblems& problems, ConsensusConfig& out,
                    std::vector<std::string>& origins);

}  // namespace passepartout
