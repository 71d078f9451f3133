// The presets of issue 32's families (synth_presets_gemma_lfm_qwen2.cpp), for
// synth_preset.
#pragma once

#include "tools/synth.h"

namespace sluice::tools {

SynthConfig gemma_4_26b_a4b();  // "gemma-4-26b-a4b" (gemma4)
SynthConfig lfm2_8b_a1b();      // "lfm2-8b-a1b" (lfm2moe)
SynthConfig qwen2_57b_a14b();   // "qwen2-57b-a14b" (qwen2moe)

}  // namespace sluice::tools
