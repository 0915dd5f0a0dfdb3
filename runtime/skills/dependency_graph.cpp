// Load planning: duplicates, cycles (Tarjan's strongly connected components),
// unmet dependencies propagated to dependents, then Kahn's order with a priority tie-break.
#include "skills/dependency_graph.hpp"

#include <algorithm>
#include <cassert>
#include <deque>
#include <optional>
#include <set>
#include <utility>

namespace passepartout {
namespace {

constexpr std::size_t kNone = static_cast<std::size_t>(-1);
// Longest chain of disabled dependencies a reason spells out in full.
constexpr std::size_t kMaxQuotedLinks = 3;

// Most skills a cycle's reason names; a longer one shows its first and last ones.
constexpr std::size_t kMaxCycleShown = 10;

// The skill a chain of disabled dependents goes back to, its own reason, and
// how many links lead there (0 for the skill itself).
struct Cause {
  std::string name;
  std::string reason;
  std::size_t links = 0;
};

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

// "a.yaml and b.yaml", "a.yaml, b.yaml and c.yaml": file names, or whole
// paths when the file names alone would not tell the manifests apart.
std::string list_files(const std::vector<const SkillManifest*>& copies) {
  std::vector<std::string> names;
  names.reserve(copies.size());
  for (const SkillManifest* m : copies) names.push_back(m->path.filename().string());
  std::sort(names.begin(), names.end());
  if (std::adjacent_find(names.begin(), names.end()) != names.end()) {
    names.clear();
    for (const SkillManifest* m : copies) names.push_back(m->path.string());
    std::sort(names.begin(), names.end());
  }
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += names[i];
  }
  return out;
}

// The dependency as an operator wrote it: "policy >=1.0".
std::string written(const Dependency& dep) {
  if (!dep.text.empty()) return dep.text;
  return dep.constraint.is_any() ? dep.name : dep.name + " " + dep.constraint.to_string();
}

// The skills with a unique name, and the edges between them.
struct Graph {
  std::vector<const SkillManifest*> nodes;     // sorted by name
  std::map<std::string, std::size_t> index;    // name -> node
  std::vector<std::vector<std::size_t>> deps;  // node -> its dependencies among nodes, by name, no repeats
};

// Strongly connected components, each emitted after every component it
// depends on (Tarjan's order), without recursion so a long chain cannot
// exhaust the stack.
std::vector<std::vector<std::size_t>> components(const Graph& g) {
  const std::size_t n = g.nodes.size();
  std::vector<std::size_t> order(n, kNone);
  std::vector<std::size_t> low(n, 0);
  std::vector<bool> on_stack(n, false);
  std::vector<std::size_t> stack;
  std::vector<std::pair<std::size_t, std::size_t>> calls;  // node, next edge to follow
  std::vector<std::vector<std::size_t>> result;
  std::size_t counter = 0;

  auto visit = [&](std::size_t v) {
    order[v] = low[v] = counter++;
    stack.push_back(v);
    on_stack[v] = true;
    calls.emplace_back(v, 0);
  };

  for (std::size_t root = 0; root < n; ++root) {
    if (order[root] != kNone) continue;
    visit(root);
    while (!calls.empty()) {
      const std::size_t v = calls.back().first;
      const std::size_t edge = calls.back().second;
      if (edge < g.deps[v].size()) {
        ++calls.back().second;
        const std::size_t w = g.deps[v][edge];
        if (order[w] == kNone)
          visit(w);
        else if (on_stack[w])
          low[v] = std::min(low[v], order[w]);
        continue;
      }
      if (low[v] == order[v]) {
        std::vector<std::size_t> component;
        std::size_t w = kNone;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = false;
          component.push_back(w);
        } while (w != v);
        result.push_back(std::move(component));
      }
      calls.pop_back();
      if (!calls.empty()) {
        const std::size_t parent = calls.back().first;
        low[parent] = std::min(low[parent], low[v]);
      }
    }
  }
  return result;
}

// "dependency cycle: a -> b -> a": the shortest cycle through `start` within
// its component (dependencies tried in name order), written from its smallest name.
std::string cycle_through(const Graph& g, std::size_t start, const std::vector<bool>& in_component) {
  std::vector<std::size_t> parent(g.nodes.size(), kNone);
  std::deque<std::size_t> queue{start};
  std::size_t last = kNone;  // the node whose dependency closes the cycle
  while (!queue.empty() && last == kNone) {
    std::size_t v = queue.front();
    queue.pop_front();
    for (std::size_t w : g.deps[v]) {
      if (!in_component[w]) continue;
      if (w == start) {
        last = v;
        break;
      }
      if (parent[w] == kNone) {
        parent[w] = v;
        queue.push_back(w);
      }
    }
  }
  assert(last != kNone && "a member of a cyclic component lies on a cycle");

  std::vector<std::size_t> cycle;
  for (std::size_t v = last; v != start; v = parent[v]) cycle.push_back(v);
  cycle.push_back(start);
  std::reverse(cycle.begin(), cycle.end());
  auto smallest = std::min_element(cycle.begin(), cycle.end());  // nodes are sorted by name
  std::rotate(cycle.begin(), smallest, cycle.end());

  // A very long cycle is shown by its ends, so the reason stays one readable line.
  std::string text = "dependency cycle: ";
  for (std::size_t i = 0; i < cycle.size(); ++i) {
    if (cycle.size() > kMaxCycleShown && i == kMaxCycleShown - 2) {
      text += "... -> ";
      i = cycle.size() - 2;
    }
    text += g.nodes[cycle[i]]->name + " -> ";
  }
  text += g.nodes[cycle.front()]->name;
  if (cycle.size() > kMaxCycleShown) text += " (" + std::to_string(cycle.size()) + " skills)";
  return text;
}

}  // namespace

LoadPlan DependencyGraph::plan(std::span<const SkillManifest> manifests,
                               const std::map<std::string, SemVer>& available) {
  std::map<std::string, std::vector<const SkillManifest*>> by_name;
  for (const SkillManifest& m : manifests) by_name[m.name].push_back(&m);

  std::map<std::string, std::string> reasons;  // disabled skill -> why
  std::map<std::string, Cause> causes;         // disabled skill -> where its trouble starts
  Graph g;
  for (const auto& [name, copies] : by_name) {
    if (copies.size() > 1) {
      reasons[name] = "duplicate skill name " + in_quotes(name) + " (" + list_files(copies) + ")";
      causes[name] = Cause{name, reasons[name]};
      continue;
    }
    g.index.emplace(name, g.nodes.size());
    g.nodes.push_back(copies.front());
  }
  g.deps.resize(g.nodes.size());
  for (std::size_t v = 0; v < g.nodes.size(); ++v) {
    for (const Dependency* dep : g.nodes[v]->requirements()) {
      if (auto it = g.index.find(dep->name); it != g.index.end()) g.deps[v].push_back(it->second);
    }
    std::sort(g.deps[v].begin(), g.deps[v].end());
    g.deps[v].erase(std::unique(g.deps[v].begin(), g.deps[v].end()), g.deps[v].end());
  }

  // Components come dependencies first, so a dependency's fate is settled
  // before its dependents look at it.
  std::vector<bool> in_component(g.nodes.size(), false);
  for (const std::vector<std::size_t>& component : components(g)) {
    const std::size_t first = component.front();
    bool cyclic = component.size() > 1 || std::binary_search(g.deps[first].begin(), g.deps[first].end(), first);
    if (cyclic) {
      for (std::size_t v : component) in_component[v] = true;
      for (std::size_t v : component) {
        const std::string& name = g.nodes[v]->name;
        reasons[name] = cycle_through(g, v, in_component);
        causes[name] = Cause{name, reasons[name]};
      }
      for (std::size_t v : component) in_component[v] = false;
      continue;
    }

    const SkillManifest& skill = *g.nodes[first];
    for (const Dependency* requirement : skill.requirements()) {
      const Dependency& dep = *requirement;
      std::optional<SemVer> version;
      if (auto it = by_name.find(dep.name); it != by_name.end()) {
        if (it->second.size() == 1) version = it->second.front()->version;
      } else if (auto a = available.find(dep.name); a != available.end()) {
        version = a->second;
      } else {
        reasons[skill.name] = std::string(dep.verb()) + " " + in_quotes(dep.name) + ", which is not installed";
        causes[skill.name] = Cause{skill.name, reasons[skill.name]};
        break;
      }
      if (version && !dep.constraint.matches(*version)) {
        reasons[skill.name] =
            "requires " + in_quotes(written(dep)) + ", but " + dep.name + " is " + version->to_string();
        causes[skill.name] = Cause{skill.name, reasons[skill.name]};
        break;
      }
      if (auto r = reasons.find(dep.name); r != reasons.end()) {
        const Cause& cause = causes.at(dep.name);
        std::string head = std::string(dep.verb()) + " " + in_quotes(dep.name) + ", which is disabled (";
        // A long chain of dependents would nest without bound; past a few
        // links, name the first one and where the chain starts.
        reasons[skill.name] = cause.links < kMaxQuotedLinks ? head + r->second + ")"
                                                            : head + "... depends on " + in_quotes(cause.name) +
                                                                  ", which is disabled (" + cause.reason + "))";
        causes[skill.name] = Cause{cause.name, cause.reason, cause.links + 1};
        break;
      }
    }
  }

  // Kahn's algorithm over the skills that load; every dependency of such a
  // skill is either another loading skill or an available one.
  auto before = [&](std::size_t a, std::size_t b) {
    if (g.nodes[a]->priority != g.nodes[b]->priority) {
      return g.nodes[a]->priority > g.nodes[b]->priority;
    }
    return g.nodes[a]->name < g.nodes[b]->name;
  };
  std::set<std::size_t, decltype(before)> ready(before);
  std::vector<std::size_t> waiting_on(g.nodes.size(), 0);
  std::vector<std::vector<std::size_t>> dependents(g.nodes.size());
  std::size_t loading = 0;
  for (std::size_t v = 0; v < g.nodes.size(); ++v) {
    if (reasons.count(g.nodes[v]->name) != 0) continue;
    ++loading;
    for (std::size_t w : g.deps[v]) {
      assert(reasons.count(g.nodes[w]->name) == 0 && "a loading skill depends only on loading ones");
      dependents[w].push_back(v);
    }
    waiting_on[v] = g.deps[v].size();
    if (waiting_on[v] == 0) ready.insert(v);
  }

  LoadPlan plan;
  while (!ready.empty()) {
    std::size_t v = *ready.begin();
    ready.erase(ready.begin());
    plan.order.push_back(g.nodes[v]);
    for (std::size_t d : dependents[v]) {
      if (--waiting_on[d] == 0) ready.insert(d);
    }
  }
  assert(plan.order.size() == loading && "skills left after the cycles are removed form a DAG");
  (void)loading;

  for (auto& [name, reason] : reasons) plan.disabled.push_back(Disabled{name, std::move(reason)});
  return plan;
}

}  // namespace passepartout
