#include "runtime/slot_file.h"

#include <cstring>
#include <filesystem>

#include "io/output_file.h"
#include "io/whole_file.h"

namespace sluice::runtime {
namespace {

constexpr char kMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'S', 'L'};

uint64_t fnv1a(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

struct Reader {
  std::string_view in;
  const std::string& name;
  size_t at = 0;
  std::string_view take(uint64_t n, const char* what) {
    if (n > in.size() - at)
      throw SlotFileError(name + ": truncated slot file: " + what + " needs " + std::to_string(n) + " bytes at offset " +
                          std::to_string(at) + ", the file has " + std::to_string(in.size() - at) + " left");
    std::string_view s = in.substr(at, n);
    at += n;
    return s;
  }
  template <typename T>
  T get(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof v, what).data(), sizeof v);
    return v;
  }
};

// The KV type the state's header names (state_io.h: u32 n_layers, i32 n_past, u32 kv_type).
uint32_t state_kv_type(std::string_view state) {
  uint32_t kv = 0;
  if (state.size() >= 12) std::memcpy(&kv, state.data() + 8, 4);
  return kv;
}

}  // namespace

SlotIdentity slot_identity(const gguf::GgufModel& gguf, const model::Model& model) {
  SlotIdentity id;
  for (const std::string& p : gguf.paths()) {
    std::error_code ec;
    const auto n = std::filesystem::file_size(p, ec);
    if (!ec) id.model_bytes += n;
  }
  std::string table;
  for (const gguf::TensorInfo& t : gguf.tensors()) {
    table += t.name;
    table.push_back('\0');
    put<uint32_t>(table, static_cast<uint32_t>(t.type));
    for (uint64_t d : t.ne) put<uint64_t>(table, d);
    put<uint32_t>(table, t.split);
    put<uint64_t>(table, t.offset);
  }
  id.tensor_hash = fnv1a(table);
  id.n_ctx = static_cast<uint32_t>(model.n_ctx());
  return id;
}

std::string encode_slot_file(const SlotIdentity& id, const std::vector<int32_t>& tokens, std::string_view state) {
  std::string out(kMagic, sizeof kMagic);
  put<uint32_t>(out, kSlotFileVersion);
  put<uint64_t>(out, id.model_bytes);
  put<uint64_t>(out, id.tensor_hash);
  put<uint32_t>(out, id.n_ctx);
  put<uint32_t>(out, state_kv_type(state));
  put<uint32_t>(out, static_cast<uint32_t>(tokens.size()));
  out.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(int32_t));
  put<uint64_t>(out, state.size());
  out.append(state);
  put<uint64_t>(out, fnv1a(out));
  return out;
}

SlotContents decode_slot_file(std::string_view bytes, const SlotIdentity& want, int n_vocab, const std::string& name) {
  Reader r{bytes, name};
  if (r.take(sizeof kMagic, "the magic") != std::string_view(kMagic, sizeof kMagic))
    throw SlotFileError(name + ": not a sluice slot file (bad magic)");
  const uint32_t version = r.get<uint32_t>("the version");
  if (version != kSlotFileVersion)
    throw SlotFileError(name + ": slot file version " + std::to_string(version) + ", this sluice reads version " +
                        std::to_string(kSlotFileVersion));
  // The hash first: a corrupt file is reported as such, not by whatever field it broke.
  if (bytes.size() < 8 + 4 + 8)
    throw SlotFileError(name + ": truncated slot file (" + std::to_string(bytes.size()) + " bytes)");
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  if (fnv1a(bytes.substr(0, bytes.size() - 8)) != stored)
    throw SlotFileError(name + ": corrupt or truncated slot file (its checksum does not match)");
  Reader body{bytes.substr(0, bytes.size() - 8), name, r.at};
  const uint64_t model_bytes = body.get<uint64_t>("the model size");
  const uint64_t hash = body.get<uint64_t>("the tensor-table hash");
  if (model_bytes != want.model_bytes || hash != want.tensor_hash)
    throw SlotFileError(name + ": the slot was saved from another model (" + std::to_string(model_bytes) +
                        " bytes, tensor table hash " + std::to_string(hash) + "; this one: " +
                        std::to_string(want.model_bytes) + " bytes, hash " + std::to_string(want.tensor_hash) + ")");
  const uint32_t n_ctx = body.get<uint32_t>("n_ctx");
  if (n_ctx != want.n_ctx)
    throw SlotFileError(name + ": the slot was saved with a context of " + std::to_string(n_ctx) +
                        " tokens; it is loaded now with " + std::to_string(want.n_ctx) + " (-c)");
  const uint32_t kv = body.get<uint32_t>("the KV type");
  const uint32_t n_tokens = body.get<uint32_t>("the token count");
  if (n_tokens > n_ctx)
    throw SlotFileError(name + ": " + std::to_string(n_tokens) + " tokens, more than the context (" +
                        std::to_string(n_ctx) + ")");
  SlotContents c;
  const std::string_view ids = body.take(uint64_t(n_tokens) * 4, "the tokens");
  c.tokens.resize(n_tokens);
  std::memcpy(c.tokens.data(), ids.data(), ids.size());
  for (int32_t t : c.tokens)
    if (t < 0 || t >= n_vocab)
      throw SlotFileError(name + ": token id " + std::to_string(t) + " outside the vocabulary [0, " +
                          std::to_string(n_vocab) + ")");
  const uint64_t n_state = body.get<uint64_t>("the state size");
  c.state = body.take(n_state, "the state");
  if (body.at != body.in.size())
    throw SlotFileError(name + ": " + std::to_string(body.in.size() - body.at) + " unexpected bytes after the state");
  if (state_kv_type(c.state) != kv) throw SlotFileError(name + ": the header's KV type differs from the state's");
  return c;
}

void save_slot(const std::string& path, const model::Model& model, const SlotIdentity& id, int slot,
               const std::vector<int32_t>& tokens, const std::vector<std::string>& inputs, const std::string& flag) {
  if (static_cast<int>(tokens.size()) != model.slot_n_past(slot))
    throw Error("slot " + std::to_string(slot) + ": " + std::to_string(tokens.size()) +
                " tokens but the state holds " + std::to_string(model.slot_n_past(slot)) + " positions");
  std::string state;
  model.slot_save(slot, state);
  const std::string bytes = encode_slot_file(id, tokens, state);
  io::OutputOptions opts;
  opts.flag = flag;
  opts.inputs = inputs;
  io::OutputFile out(path, opts);
  out.write(bytes);
  out.commit();
}

std::vector<int32_t> restore_slot(const std::string& path, model::Model& model, const SlotIdentity& id, int slot) {
  // The largest file this model can have written: every state byte, every
  // token, and the headers' fixed fields (far less than 1 MiB).
  const model::StateBytes sb = model.slot_state_bytes();
  const uint64_t max = sb.total() + uint64_t(model.n_ctx()) * 4 + (1u << 20);
  const std::string bytes = io::read_whole_file(path, max);
  SlotContents c = decode_slot_file(bytes, id, static_cast<int>(model.hparams().n_vocab), path);
  try {
    model.slot_load(slot, c.state);
  } catch (const SlotFileError&) {
    throw;
  } catch (const Error& e) {
    throw SlotFileError(path + ": " + e.what());
  }
  const int held = model.slot_n_past(slot);
  if (held != static_cast<int>(c.tokens.size())) {
    model.slot_reset(slot);
    throw SlotFileError(path + ": " + std::to_string(c.tokens.size()) + " tokens but the state holds " +
                        std::to_string(held) + " positions");
  }
  return c.tokens;
}

}  // namespace sluice::runtime
