// The three stores behind locate.h, one function pair each. Internal to
// src/store.
//
// A store's answer to a reference: the GGUF it names, or (path empty) one
// line saying where it looked and why that did not fit, for the not-found
// message. Problems that are not "absent" (an ambiguous quant, a broken
// manifest, a missing blob) are thrown as sluice::Error instead.
#pragma once

#include <string>
#include <vector>

#include "store/locate.h"

namespace sluice::store::detail {

struct Lookup {
  std::string path;    // the GGUF; "" when this store does not have the reference
  std::string looked;  // "ollama: FOLDER: why not" when path is empty
};

Lookup find_in_ollama(const std::string& ref, const std::string& root);
Lookup find_in_hf_cache(const std::string& ref, const std::string& hub);
Lookup find_in_lmstudio(const std::string& ref, const std::string& root);

void list_ollama(const std::string& root, std::vector<StoredModel>& out);
void list_hf_cache(const std::string& hub, std::vector<StoredModel>& out);
void list_lmstudio(const std::string& root, std::vector<StoredModel>& out);

}  // namespace sluice::store::detail
