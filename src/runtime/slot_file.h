// A sequence slot's state as a file: `sluice serve`'s /slots/{id}?action=save
// and restore, and `sluice chat --save/--load`, so a long system prompt or
// conversation is evaluated once per machine, not once per process.
//
// File layout (host byte order, little-endian on every supported machine):
//   8 bytes "SLUICESL", u32 version (kSlotFileVersion)
//   the model it belongs to: u64 bytes of its GGUF file(s), u64 FNV-1a hash
//     of its tensor table (name, type, shape, split, offset of every tensor),
//     u32 n_ctx, u32 kv type (0 f32, 1 f16)
//   u32 n_tokens, n_tokens i32 token ids (what the state holds, in order)
//   u64 n_state, n_state bytes: the model state (model/state/state_io.h)
//   u64 FNV-1a hash of every byte before it
// Written through io::OutputFile (temporary file, fsync, rename), so a crash
// leaves the previous file or none, never half of one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"
#include "util/error.h"

namespace sluice::runtime {

inline constexpr uint32_t kSlotFileVersion = 1;

// A slot file that is corrupt, truncated, of another format version or of
// another model / context / KV type: the client's mistake (the server's 400).
class SlotFileError : public Error {
 public:
  using Error::Error;
};

struct SlotIdentity {
  uint64_t model_bytes = 0;
  uint64_t tensor_hash = 0;
  uint32_t n_ctx = 0;
};
// The identity of `gguf` loaded as `model` (file sizes from the file system).
SlotIdentity slot_identity(const gguf::GgufModel& gguf, const model::Model& model);

// The file's bytes for a slot holding `tokens` with state `state` (Model::slot_save).
std::string encode_slot_file(const SlotIdentity& id, const std::vector<int32_t>& tokens, std::string_view state);

struct SlotContents {
  std::vector<int32_t> tokens;
  std::string_view state;  // into the decoded bytes
};
// Checks and splits a slot file's bytes: SlotFileError naming `name` and the
// field for a bad magic or version, a hash mismatch (corrupt), a size past
// the end (truncated), or another model, n_ctx or KV type (kv type read from
// the state's header); token ids must lie in [0, n_vocab).
SlotContents decode_slot_file(std::string_view bytes, const SlotIdentity& want, int n_vocab, const std::string& name);

// Saves slot `slot` of `model` (holding `tokens`, which must be its
// slot_n_past() tokens) to `path`, crash-safe. `inputs` (the model's
// files) are never overwritten: such a path is an Error naming `flag`.
void save_slot(const std::string& path, const model::Model& model, const SlotIdentity& id, int slot,
               const std::vector<int32_t>& tokens, const std::vector<std::string>& inputs = {},
               const std::string& flag = "");
// Restores slot `slot` from `path` and returns the tokens it holds. The
// file is read with a size bound from the model's slot state, so a huge file
// is refused before it is read. SlotFileError for a bad file (the slot is
// then empty), Error for a file that cannot be read.
std::vector<int32_t> restore_slot(const std::string& path, model::Model& model, const SlotIdentity& id, int slot);

}  // namespace sluice::runtime
