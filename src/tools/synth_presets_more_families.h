// The presets of issue 32's families (synth_presets_more_families.cpp), for
// synth_preset.
#pragma once

#include "tools/synth.h"

namespace sluice::tools {

SynthConfig gemma_4_26b_a4b();  // "gemma-4-26b-a4b" (gemma4)
SynthConfig lfm2_8b_a1b();      // "lfm2-8b-a1b" (lfm2moe)
SynthConfig qwen2_57b_a14b();   // "qwen2-57b-a14b" (qwen2moe)
SynthConfig ling_30_tiny();     // "ling-3.0-tiny" (bailingmoe3)

}  // namespace sluice::tools
