// -m MODEL for every command: a GGUF path, or a name in a local model store
// (ollama, Hugging Face cache, LM Studio; store/locate.h). The store folders
// come from the environment here, the only place that reads it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "store/locate.h"

namespace sluice::cli {

// The store folders: $OLLAMA_MODELS, else ~/.ollama/models; $HF_HUB_CACHE,
// else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub; ~/.lmstudio/models and ~/.cache/lm-studio/models.
store::StoreRoots store_roots_from_env();

// The transform every model option carries: an existing file (or anything
// written as a path) passes unchanged; a store reference becomes the GGUF's
// path (store::resolve_model; a name no store has is a sluice::Error, exit 1,
// naming `flag` and every folder looked in). `given`, when set, receives the
// argument as typed (serve's default model id).
CLI::Validator model_reference(const std::string& flag, std::string* given = nullptr);

}  // namespace sluice::cli
