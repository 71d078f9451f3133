// libFuzzer target for the GGUF parser: any byte string must either parse or
// throw sluice::Error — never crash, hang, leak or read out of bounds.
#include <cstddef>
#include <cstdint>

#include "gguf/gguf.h"
#include "io/file.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice;
  try {
    auto file = io::memory_file("fuzz.gguf", std::vector<uint8_t>(data, data + size));
    std::vector<gguf::ParsedFile> splits;
    splits.push_back(gguf::parse(*file));
    const gguf::GgufModel model = gguf::GgufModel::from_parsed(std::move(splits));
    // Exercise the accessors on whatever was parsed; they must not misbehave either.
    for (const auto& [key, value] : model.metadata().entries()) {
      try {
        (void)model.metadata().get_float(key);
      } catch (const Error&) {
      }
      try {
        (void)model.metadata().get_string_array(key);
      } catch (const Error&) {
      }
    }
    for (const auto& t : model.tensors()) {
      (void)t.row_bytes();
      (void)t.n_rows();
      if (t.ne.size() == 3) {
        const auto r = model.expert_range(t, t.ne[2] - 1);
        if (r.offset + r.bytes != t.offset + t.bytes) __builtin_trap();  // last expert ends the tensor
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
