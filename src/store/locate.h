// Models where users already keep them: the ollama store, the Hugging Face
// hub cache and LM Studio's models folder. Pure filesystem logic: no model
// knowledge (the GGUF is never opened here) and nothing is ever downloaded.
//
// References (what `-m` takes when its argument is not an existing file):
//   ollama        [HOST/][NAMESPACE/]MODEL[:TAG]  (HOST registry.ollama.ai,
//                 NAMESPACE library, TAG latest when left out):
//                 ROOT/manifests/HOST/NAMESPACE/MODEL/TAG is a JSON manifest
//                 whose layer of mediaType application/vnd.ollama.image.model
//                 has digest sha256:HEX; the GGUF is ROOT/blobs/sha256-HEX.
//   Hugging Face  ORG/NAME[:FILE.gguf|:QUANT] in HUB/models--ORG--NAME/
//                 snapshots/REV/, REV from refs/main, else the newest snapshot.
//   LM Studio     PUBLISHER/MODEL[:FILE.gguf|:QUANT] in ROOT/PUBLISHER/MODEL/.
// FILE.gguf names a file (its name or its path inside the folder); QUANT picks
// the one model file whose path contains it, case-insensitively; none picks
// the folder's only model. A split model counts once, as its first part
// (NAME-00001-of-0000N.gguf); mmproj* files (vision projectors) are not models.
// More than one candidate is an error listing them. Folder names match
// exactly, else case-insensitively when that is unambiguous.
//
// The stores are asked in the order ollama, Hugging Face, LM Studio; the first
// that has the reference answers. Nothing below the CLI reads the
// environment, so the CLI fills StoreRoots.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::store {

struct StoreRoots {
  std::string ollama;  // $OLLAMA_MODELS, else ~/.ollama/models ("" when unknown)
  std::string hf_hub;  // $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
  std::vector<std::string> lmstudio;  // ~/.lmstudio/models, ~/.cache/lm-studio/models
};

// True when `arg` is written as a file path rather than a store reference:
// it starts with '/', './', '../' or '~', or it ends in .gguf and has no ':'.
bool looks_like_path(const std::string& arg);

// The file `arg` names. An existing file (not a folder) is returned as given,
// and so is anything looks_like_path (opening it reports what is wrong).
// Otherwise the stores are asked; the GGUF's path is returned (a split
// model's first part). Throws sluice::Error when no store has it (the message
// says, per store, which folder or manifest it looked for and why it did not
// fit), when a quant or folder is ambiguous (listing the candidates), or when
// an ollama manifest is broken or its blob is missing.
std::string resolve_model(const std::string& arg, const StoreRoots& roots);

// One model a store holds, as `sluice models` lists it.
struct StoredModel {
  std::string store;      // "ollama", "huggingface" or "lmstudio"
  std::string reference;  // what -m takes; resolve_model(reference) gives `path`
  std::string path;       // the GGUF (first part of a split model); "" when `error` is set
  std::string error;      // why the entry has no GGUF (a broken manifest, a missing blob)
};

// Every model in the three stores, store by store, each sorted by reference.
// Missing roots are skipped; never throws for what it finds on disk.
std::vector<StoredModel> list_models(const StoreRoots& roots);

}  // namespace sluice::store
