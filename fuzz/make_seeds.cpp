// Writes a handful of tiny valid GGUF files (< 10 KB each) into DIR as the
// fuzzing seed corpus: usage `gguf_fuzz_seeds DIR`. (Named .bin because the
// repository ignores *.gguf.)
#include <cstdio>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "util/error.h"

using namespace sluice;
using namespace sluice::gguf;

namespace {

void write_tensors(Writer& w, const std::vector<uint64_t>& sizes) {
  w.write_header();
  for (uint64_t n : sizes) {
    std::vector<uint8_t> bytes(n, 0x5a);
    w.write_tensor_data(bytes.data(), bytes.size());
  }
  w.finish();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  try {
    {  // metadata only, every scalar type and nested arrays
      Writer w(dir + "/seed-values.bin");
      Value u8; u8.type = ValueType::UINT8; u8.u = 7;
      Value i64; i64.type = ValueType::INT64; i64.i = -5;
      Value f64; f64.type = ValueType::FLOAT64; f64.f = 0.25;
      Value nested; nested.type = ValueType::ARRAY; nested.elem_type = ValueType::ARRAY;
      nested.array = {Value::from_i32s({1, 2}), Value::from_i32s({3})};
      w.add_metadata("general.architecture", Value::from_string("llama"));
      w.add_metadata("u8", u8);
      w.add_metadata("i64", i64);
      w.add_metadata("f64", f64);
      w.add_metadata("b", Value::from_bool(true));
      w.add_metadata("u64", Value::from_u64(123));
      w.add_metadata("f32", Value::from_f32(1.5f));
      w.add_metadata("tokens", Value::from_strings({"<unk>", "<s>", "</s>", "\xE2\x96\x81the"}));
      w.add_metadata("scores", Value::from_f32s({0, -1, -2, -3}));
      w.add_metadata("nested", nested);
      write_tensors(w, {});
    }
    {  // quantized tensors and a 3-D expert tensor
      Writer w(dir + "/seed-tensors.bin");
      w.add_metadata("general.architecture", Value::from_string("qwen3moe"));
      w.add_tensor("token_embd.weight", GgmlType::Q8_0, {32, 4});
      w.add_tensor("blk.0.ffn_gate_exps.weight", GgmlType::F16, {8, 4, 4});
      w.add_tensor("blk.0.ffn_down_exps.weight", GgmlType::Q4_K, {256, 1, 2});
      w.add_tensor("output_norm.weight", GgmlType::F32, {8});
      write_tensors(w, {136, 256, 288, 32});
    }
    {  // non-default alignment
      Writer w(dir + "/seed-aligned.bin", 128);
      w.add_metadata("split.count", Value::from_u32(1));
      w.add_tensor("a", GgmlType::BF16, {16});
      w.add_tensor("b", GgmlType::MXFP4, {64, 2});
      write_tensors(w, {32, 68});
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
