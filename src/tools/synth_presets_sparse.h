// The sparse-attention presets (synth_presets_sparse.cpp), for synth_preset.
#pragma once

#include "tools/synth.h"

namespace sluice::tools {

SynthConfig deepseek_v4_flash();  // "deepseek-v4-flash" (deepseek4)
SynthConfig glm_5();              // "glm-5" (glm-dsa)

}  // namespace sluice::tools
