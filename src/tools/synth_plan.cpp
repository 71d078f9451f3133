// synth's plan: the generator registered for the architecture
// (model/arch/registry.def) fills a PlanBuilder whose vocabulary is synth's.
#include "tools/synth_plan.h"

#include "util/error.h"

namespace sluice::tools {

std::vector<std::string> synth_arch_names() { return model::synth_architectures(); }

SynthPlan synth_plan(const SynthConfig& cfg) {
  validate_synth_config(cfg);
  const model::ArchSynth* gen = model::find_arch_synth(cfg.arch);
  if (!gen) {
    std::string names;
    for (const auto& n : synth_arch_names()) names += (names.empty() ? "" : ", ") + n;
    fail("--arch", "unsupported architecture '" + cfg.arch + "' (supported: " + names + ")");
  }
  PlanBuilder p([&cfg](uint32_t* n_vocab) { return synth_vocab(cfg.vocab_path, cfg.n_vocab, n_vocab); },
                cfg.vocab_path.empty());
  gen->plan(cfg, p);
  return p.take();
}

}  // namespace sluice::tools
