// Session::save_state / load_state: `sluice chat --save/--load` through the
// slot file format the server's /slots endpoints use (runtime/slot_file.h).
#include "runtime/session.h"
#include "runtime/slot_file.h"

namespace sluice::runtime {

size_t Session::save_state(const std::string& path) {
  sync_model();  // the state holds exactly tokens_ (a fallen-back rollback re-evaluated)
  save_slot(path, *model_, slot_identity(*gguf_, *model_), 0, tokens_, gguf_->paths(), "--save");
  return tokens_.size();
}

size_t Session::load_state(const std::string& path) {
  if (head_drafts()) throw Error(path + ": loading a saved state with --mtp is not supported");
  reset();
  tokens_ = restore_slot(path, *model_, slot_identity(*gguf_, *model_), 0);
  return tokens_.size();
}

}  // namespace sluice::runtime
