// What the benchmarks load: the pass-through fixture gates and the bundled skills.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "skills/registry.hpp"
#include "skills/skill_boot.hpp"
#include "skills/skill_loader.hpp"

namespace passepartout::bench {

[[noreturn]] inline void die(const char* bench, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", bench, message.c_str());
  std::exit(1);
}

// A loader and a registry holding either the first `n` pass-through fixture
// gates (priorities 100, 99, ...) or, with bundled(), every bundled skill.
struct LoadedGates {
  std::unique_ptr<SkillLoader> loader;
  std::unique_ptr<SkillLoader> fixture_loader;  // bundled(true): the pass gate in a worker
  Registry registry;

  // `isolation`: "in-process", or "process" for gates in worker processes.
  static std::unique_ptr<LoadedGates> pass_through(int n, const std::string& isolation = "in-process") {
    auto gates = create(PP_FIXTURE_DIR);
    std::vector<std::shared_ptr<const Slot>> slots;
    for (int i = 0; i < n; ++i) {
      std::string name = "pass-gate-" + std::to_string(i);
      auto manifest = SkillManifest::parse("name: " + name + "\nversion: 1.0.0\nlibrary: lib" + name +
                                               ".so\nabi: 1\npriority: " + std::to_string(100 - i) +
                                               "\nisolation: " + isolation + "\n",
                                           name + ".yaml");
      if (!manifest) die("bench", manifest.error().message);
      auto slot = gates->loader->load(*manifest);
      if (!slot) die("bench", slot.error().message);
      slots.push_back(std::move(*slot));
    }
    gates->registry.publish(std::move(slots));
    return gates;
  }

  // With `process_gate`, a pass-through gate in a worker process among them.
  static std::unique_ptr<LoadedGates> bundled(bool process_gate = false) {
    auto gates = create(PP_PLUGIN_DIR);
    auto boot = boot_skill_dir(PP_MANIFEST_DIR, *gates->loader);
    if (!boot || !boot->all_loaded()) die("bench", "the bundled skills did not all load");
    std::vector<std::shared_ptr<const Slot>> slots = boot->slots;
    if (process_gate) {
      gates->fixture_loader = std::move(create(PP_FIXTURE_DIR)->loader);
      auto manifest = SkillManifest::parse(
          "name: pass-gate-0\nversion: 1.0.0\nlibrary: libpass-gate-0.so\nabi: 1\nisolation: process\n",
          "pass-gate-0.yaml");
      if (!manifest) die("bench", manifest.error().message);
      auto slot = gates->fixture_loader->load(*manifest);
      if (!slot) die("bench", slot.error().message);
      slots.push_back(std::move(*slot));
    }
    gates->registry.publish(std::move(slots));
    return gates;
  }

 private:
  static std::unique_ptr<LoadedGates> create(const char* plugin_dir) {
    LoaderOptions options =
        loader_options(plugin_dir, false, std::filesystem::path(plugin_dir).parent_path() / "workspace");
    options.worker_executable = PP_PASSEPARTOUT_EXE;  // serves `skill-worker` for isolation: process
    auto created = SkillLoader::create(std::move(options));
    if (!created) die("bench", created.error().message);
    auto gates = std::make_unique<LoadedGates>();
    gates->loader = std::make_unique<SkillLoader>(std::move(*created));
    return gates;
  }
};

}  // namespace passepartout::bench
