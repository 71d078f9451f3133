#include "cli/model_ref.h"

#include <cstdlib>

#include "util/error.h"

namespace sluice::cli {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace

store::StoreRoots store_roots_from_env() {
  store::StoreRoots r;
  const std::string home = env("HOME");
  r.ollama = !env("OLLAMA_MODELS").empty() ? env("OLLAMA_MODELS")
             : home.empty()                ? ""
                                           : home + "/.ollama/models";
  // huggingface_hub's own order (constants.py): HF_HUB_CACHE, HF_HOME/hub,
  // XDG_CACHE_HOME/huggingface/hub.
  if (!env("HF_HUB_CACHE").empty())
    r.hf_hub = env("HF_HUB_CACHE");
  else if (!env("HF_HOME").empty())
    r.hf_hub = env("HF_HOME") + "/hub";
  else if (!env("XDG_CACHE_HOME").empty())
    r.hf_hub = env("XDG_CACHE_HOME") + "/huggingface/hub";
  else if (!home.empty())
    r.hf_hub = home + "/.cache/huggingface/hub";
  if (!home.empty()) r.lmstudio = {home + "/.lmstudio/models", home + "/.cache/lm-studio/models"};
  return r;
}

CLI::Validator model_reference(const std::string& flag, std::string* given) {
  return CLI::Validator(
      [flag, given](std::string& arg) {
        if (given != nullptr) *given = arg;
        try {
          arg = store::resolve_model(arg, store_roots_from_env());
        } catch (const Error& e) {
          throw Error(flag + ": " + e.what());
        }
        return std::string();
      },
      "", "model reference");
}

}  // namespace sluice::cli
