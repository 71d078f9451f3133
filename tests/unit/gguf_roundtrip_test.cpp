// Writer -> parser round trips: every metadata value type, tensor placement,
// expert slices and split models.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "io/file.h"
#include "util/error.h"
#include "test_support.h"

namespace sluice::gguf {
namespace SLUICE_TEST_FILE {

using ::testing::AllOf;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("sluice_gguf_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

using sluice::test::error_of;

Value scalar(ValueType t, uint64_t u, int64_t i = 0, double f = 0) {
  Value v;
  v.type = t;
  v.u = u;
  v.i = i;
  v.f = f;
  return v;
}

Value array_of(ValueType elem, std::vector<Value> items) {
  Value v;
  v.type = ValueType::ARRAY;
  v.elem_type = elem;
  v.array = std::move(items);
  return v;
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t k = 0; k < n; ++k) b[k] = static_cast<uint8_t>(seed + k * 13);
  return b;
}

std::vector<uint8_t> read_bytes(const std::string& path, uint64_t offset, uint64_t n) {
  auto f = io::open_file(path);
  std::vector<uint8_t> out(n);
  f->read_exact(out.data(), n, offset);
  return out;
}

TEST(GgufRoundTrip, EveryMetadataValueType) {
  TempDir dir;
  const std::string path = dir.file("values.gguf");
  {
    Writer w(path);
    w.add_metadata("u8", scalar(ValueType::UINT8, 250));
    w.add_metadata("i8", scalar(ValueType::INT8, 0, -120));
    w.add_metadata("u16", scalar(ValueType::UINT16, 65000));
    w.add_metadata("i16", scalar(ValueType::INT16, 0, -32000));
    w.add_metadata("u32", Value::from_u32(4000000000u));
    w.add_metadata("i32", Value::from_i32(-2000000000));
    w.add_metadata("f32", Value::from_f32(1.5e-6f));
    w.add_metadata("bool", Value::from_bool(true));
    w.add_metadata("str", Value::from_string("h\xC3\xA9llo\n"));
    w.add_metadata("empty_str", Value::from_string(""));
    w.add_metadata("u64", Value::from_u64(0xFEDCBA9876543210ull));
    w.add_metadata("i64", scalar(ValueType::INT64, 0, INT64_MIN));
    w.add_metadata("f64", scalar(ValueType::FLOAT64, 0, 0, 3.141592653589793));
    w.add_metadata("strs", Value::from_strings({"a", "", "\xE2\x96\x81the", std::string("nul\0in", 6)}));
    w.add_metadata("f32s", Value::from_f32s({0.5f, -2.0f}));
    w.add_metadata("i32s", Value::from_i32s({7, -8, 9}));
    w.add_metadata("empty", array_of(ValueType::UINT8, {}));
    w.add_metadata("nested", array_of(ValueType::ARRAY, {Value::from_i32s({1, 2}), Value::from_i32s({}),
                                                         Value::from_i32s({3})}));
    w.add_metadata("nested_strs", array_of(ValueType::ARRAY, {Value::from_strings({"x", "y"})}));
    w.write_header();
    w.finish();
  }
  const ParsedFile pf = parse(*io::open_file(path));
  EXPECT_EQ(pf.version, 3u);
  EXPECT_EQ(pf.alignment, 32u);
  EXPECT_TRUE(pf.tensors.empty());
  const Metadata& md = pf.metadata;
  ASSERT_EQ(md.entries().size(), 19u);
  EXPECT_EQ(md.entries()[0].first, "u8");  // file order is kept
  EXPECT_EQ(md.entries()[18].first, "nested_strs");

  EXPECT_EQ(md.find("u8")->type, ValueType::UINT8);
  EXPECT_EQ(md.get_uint("u8"), 250u);
  EXPECT_EQ(md.get_int("i8"), -120);
  EXPECT_EQ(md.get_uint("u16"), 65000u);
  EXPECT_EQ(md.get_int("i16"), -32000);
  EXPECT_EQ(md.get_uint("u32"), 4000000000u);
  EXPECT_EQ(md.get_int("u32"), 4000000000);  // integer accessors cross signedness when the value fits
  EXPECT_EQ(md.get_int("i32"), -2000000000);
  EXPECT_EQ(md.get_float("f32"), static_cast<double>(1.5e-6f));
  EXPECT_EQ(md.get_float("u16"), 65000.0);
  EXPECT_EQ(md.get_bool("bool"), true);
  EXPECT_EQ(md.get_string("str"), "h\xC3\xA9llo\n");
  EXPECT_EQ(md.get_string("empty_str"), "");
  EXPECT_EQ(md.get_uint("u64"), 0xFEDCBA9876543210ull);
  EXPECT_EQ(md.find("i64")->i, INT64_MIN);
  EXPECT_EQ(md.get_float("f64"), 3.141592653589793);
  EXPECT_EQ(md.get_string_array("strs"),
            (std::vector<std::string>{"a", "", "\xE2\x96\x81the", std::string("nul\0in", 6)}));
  EXPECT_EQ(md.get_float_array("f32s"), (std::vector<float>{0.5f, -2.0f}));
  EXPECT_EQ(md.get_int_array("i32s"), (std::vector<int64_t>{7, -8, 9}));
  EXPECT_EQ(md.get_float_array("i32s"), (std::vector<float>{7, -8, 9}));
  EXPECT_EQ(md.find("empty")->elem_type, ValueType::UINT8);
  EXPECT_TRUE(md.find("empty")->array.empty());
  const Value* nested = md.find("nested");
  ASSERT_EQ(nested->elem_type, ValueType::ARRAY);
  ASSERT_EQ(nested->array.size(), 3u);
  EXPECT_EQ(nested->array[0].elem_type, ValueType::INT32);
  EXPECT_EQ(nested->array[0].array[1].i, 2);
  EXPECT_TRUE(nested->array[1].array.empty());
  EXPECT_EQ(nested->array[2].array[0].i, 3);
  EXPECT_EQ(md.find("nested_strs")->array[0].array[1].s, "y");
  EXPECT_FALSE(md.get_uint("absent").has_value());
}

// Headers larger than the parser's 1 MiB read buffer: a 150k-token vocabulary
// and one 3 MiB string, so values straddle buffer refills.
TEST(GgufRoundTrip, MultiMegabyteHeader) {
  TempDir dir;
  const std::string path = dir.file("vocab.gguf");
  std::vector<std::string> tokens;
  for (int k = 0; k < 150000; ++k) tokens.push_back("tok" + std::to_string(k * 7919));
  std::string big(3u << 20, 'x');
  for (size_t k = 0; k < big.size(); k += 4099) big[k] = static_cast<char>('a' + k % 26);
  {
    Writer w(path);
    w.add_metadata("tokenizer.ggml.tokens", Value::from_strings(tokens));
    w.add_metadata("big", Value::from_string(big));
    w.add_tensor("t", GgmlType::F32, {2});
    w.write_header();
    const float v[2] = {1.0f, -1.0f};
    w.write_tensor_data(v, sizeof v);
    w.finish();
  }
  GgufModel m = GgufModel::open(path);
  EXPECT_EQ(m.metadata().get_string_array("tokenizer.ggml.tokens"), tokens);
  EXPECT_EQ(m.metadata().get_string("big"), big);
  EXPECT_GT(m.split(0).data_offset, 4u << 20);
  std::vector<uint8_t> expect(8);
  const float v[2] = {1.0f, -1.0f};
  std::memcpy(expect.data(), v, 8);
  EXPECT_EQ(read_bytes(path, m.require("t").offset, 8), expect);
}

TEST(GgufRoundTrip, AccessorTypeMismatchNamesKeyAndTypes) {
  Metadata md;
  md.set_source("m.gguf");
  md.add("name", Value::from_string("x"));
  md.add("neg", Value::from_i32(-1));
  md.add("big", Value::from_u64(UINT64_MAX));
  md.add("toks", Value::from_strings({"a"}));
  EXPECT_THAT(error_of([&] { md.get_uint("name"); }),
              AllOf(HasSubstr("m.gguf"), HasSubstr("'name'"), HasSubstr("string"), HasSubstr("unsigned")));
  EXPECT_THAT(error_of([&] { md.get_uint("neg"); }), HasSubstr("-1"));
  EXPECT_THAT(error_of([&] { md.get_int("big"); }), HasSubstr("'big'"));
  EXPECT_THAT(error_of([&] { md.get_string("toks"); }), AllOf(HasSubstr("array of string"), HasSubstr("'toks'")));
  EXPECT_THAT(error_of([&] { md.get_int_array("toks"); }), HasSubstr("array of string"));
  EXPECT_THAT(error_of([&] { md.get_bool("neg"); }), HasSubstr("int32"));
  EXPECT_THAT(error_of([&] { md.require_uint("nope"); }), AllOf(HasSubstr("m.gguf"), HasSubstr("missing metadata key nope")));
  EXPECT_THAT(error_of([&] { md.add("name", Value::from_u32(1)); }), HasSubstr("duplicate metadata key 'name'"));
}

// Tensors: a F32 {3} (12 B), b Q8_0 {64, 2} (2 rows x 2 blocks x 34 B = 136 B),
// experts F16 {4, 2, 3} (24 x 2 = 48 B); with alignment 64 the data offsets are 0, 64, 256.
TEST(GgufRoundTrip, TensorsLandAtAlignedOffsetsWithExactBytes) {
  TempDir dir;
  const std::string path = dir.file("tensors.gguf");
  const auto a = pattern(12, 1), b = pattern(136, 2), x = pattern(48, 3);
  {
    Writer w(path, 64);
    w.add_metadata("general.architecture", Value::from_string("test"));
    w.add_tensor("a", GgmlType::F32, {3});
    w.add_tensor("b", GgmlType::Q8_0, {64, 2});
    w.add_tensor("experts", GgmlType::F16, {4, 2, 3});
    w.write_header();
    w.write_tensor_data(a.data(), a.size());
    w.write_tensor_data(b.data(), 100);  // tensors may arrive in chunks that do not follow boundaries
    std::vector<uint8_t> rest(b.begin() + 100, b.end());
    rest.insert(rest.end(), x.begin(), x.begin() + 10);
    w.write_tensor_data(rest.data(), rest.size());
    w.write_tensor_data(x.data() + 10, 38);
    w.finish();
  }
  GgufModel m = GgufModel::open(path);
  const ParsedFile& pf = m.split(0);
  EXPECT_EQ(pf.alignment, 64u);
  EXPECT_EQ(pf.metadata.get_uint("general.alignment"), 64u);  // written because alignment != 32
  EXPECT_EQ(pf.data_offset % 64, 0u);
  EXPECT_EQ(pf.file_size, pf.data_offset + 320);  // 256 + 48 rounded up to 64
  EXPECT_EQ(fs::file_size(path), pf.file_size);
  EXPECT_EQ(m.architecture(), "test");
  ASSERT_EQ(m.tensors().size(), 3u);

  const TensorInfo& ta = m.require("a");
  EXPECT_EQ(ta.type, GgmlType::F32);
  EXPECT_EQ(ta.ne, (std::vector<uint64_t>{3}));
  EXPECT_EQ(ta.offset, pf.data_offset);
  EXPECT_EQ(ta.bytes, 12u);
  const TensorInfo& tb = m.require("b");
  EXPECT_EQ(tb.type, GgmlType::Q8_0);
  EXPECT_EQ(tb.offset, pf.data_offset + 64);
  EXPECT_EQ(tb.bytes, 136u);
  EXPECT_EQ(tb.row_bytes(), 68u);
  EXPECT_EQ(tb.n_rows(), 2u);
  EXPECT_EQ(tb.n_elements(), 128u);
  const TensorInfo& tx = m.require("experts");
  EXPECT_EQ(tx.offset, pf.data_offset + 256);
  EXPECT_EQ(tx.bytes, 48u);

  EXPECT_EQ(read_bytes(path, ta.offset, ta.bytes), a);
  EXPECT_EQ(read_bytes(path, tb.offset, tb.bytes), b);
  EXPECT_EQ(read_bytes(path, tx.offset, tx.bytes), x);
  // Padding between tensors is zero.
  EXPECT_EQ(read_bytes(path, ta.offset + 12, 52), std::vector<uint8_t>(52, 0));

  // Expert e of {4, 2, 3} F16 is 4*2*2 = 16 contiguous bytes at e*16.
  const ByteRange r2 = m.expert_range(tx, 2);
  EXPECT_EQ(r2.split, 0u);
  EXPECT_EQ(r2.offset, tx.offset + 32);
  EXPECT_EQ(r2.bytes, 16u);
  EXPECT_EQ(read_bytes(path, r2.offset, r2.bytes), std::vector<uint8_t>(x.begin() + 32, x.end()));
  EXPECT_EQ(m.expert_range(tx, 0).offset, tx.offset);
  EXPECT_THAT(error_of([&] { m.expert_range(tx, 3); }), HasSubstr("expert 3 out of range"));
  EXPECT_THAT(error_of([&] { m.expert_range(tb, 0); }), HasSubstr("not a 3-D"));
  EXPECT_EQ(m.find("zzz"), nullptr);
  EXPECT_THAT(error_of([&] { m.require("zzz"); }), AllOf(HasSubstr(path), HasSubstr("missing tensor zzz")));
}

TEST(GgufRoundTrip, WriterRejectsMisuse) {
  TempDir dir;
  const std::string path = dir.file("bad.gguf");
  EXPECT_THAT(error_of([&] { Writer w(path, 48); }), HasSubstr("power of two"));
  // Found by gguf_roundtrip_fuzz: an alignment of 2^40 was accepted, then
  // padded the header with a terabyte of zeros (and stored as a uint32, 0).
  EXPECT_THAT(error_of([&] { Writer w(path, uint64_t{1} << 40); }),
              HasSubstr("over the limit of 2097152 bytes"));
  EXPECT_NO_THROW({ Writer w(path, kMaxAlignment); });
  {
    Writer w(path);
    EXPECT_THAT(error_of([&] { w.add_tensor("q", GgmlType::Q4_0, {33}); }), HasSubstr("block size 32"));
    EXPECT_THAT(error_of([&] { w.add_tensor("z", GgmlType::F32, {4, 0}); }), HasSubstr("zero dimension"));
    EXPECT_THAT(error_of([&] { w.add_tensor("d", GgmlType::F32, {1, 1, 1, 1, 1}); }), HasSubstr("1..4"));
    w.add_tensor("t", GgmlType::F32, {2});
    EXPECT_THAT(error_of([&] { w.add_tensor("t", GgmlType::F32, {2}); }), HasSubstr("duplicate tensor name 't'"));
    w.add_metadata("k", Value::from_u32(1));
    EXPECT_THAT(error_of([&] { w.add_metadata("k", Value::from_u32(2)); }), HasSubstr("duplicate metadata key"));
    Value bad = array_of(ValueType::INT32, {Value::from_string("oops")});
    EXPECT_THAT(error_of([&] { w.add_metadata("mixed", bad); }), HasSubstr("array element of type string"));
    const float data[3] = {1, 2, 3};
    EXPECT_THAT(error_of([&] { w.write_tensor_data(data, 8); }), HasSubstr("before write_header"));
    w.write_header();
    EXPECT_THAT(error_of([&] { w.add_tensor("late", GgmlType::F32, {2}); }), HasSubstr("after the header"));
    w.write_tensor_data(data, 4);
    EXPECT_THAT(error_of([&] { w.finish(); }), AllOf(HasSubstr("'t' incomplete"), HasSubstr("4 of 8")));
    EXPECT_THAT(error_of([&] { w.write_tensor_data(data, 12); }), HasSubstr("more tensor bytes"));
  }
  EXPECT_FALSE(fs::exists(path)) << "an unfinished output must be removed";
}

void write_split(const std::string& path, uint16_t no, uint16_t count, std::optional<int32_t> tensor_count,
                 const std::vector<std::string>& names) {
  Writer w(path);
  Value vno = scalar(ValueType::UINT16, no), vcount = scalar(ValueType::UINT16, count);
  w.add_metadata("general.architecture", Value::from_string("split" + std::to_string(no)));
  w.add_metadata("split.no", vno);
  w.add_metadata("split.count", vcount);
  if (tensor_count) w.add_metadata("split.tensors.count", Value::from_i32(*tensor_count));
  for (const auto& n : names) w.add_tensor(n, GgmlType::F32, {8});
  w.write_header();
  for (size_t k = 0; k < names.size(); ++k) {
    const auto bytes = pattern(32, static_cast<uint8_t>(no * 16 + k));
    w.write_tensor_data(bytes.data(), bytes.size());
  }
  w.finish();
}

TEST(GgufSplit, OpensAllSplitsAsOneModel) {
  TempDir dir;
  const std::string p1 = dir.file("m-00001-of-00002.gguf"), p2 = dir.file("m-00002-of-00002.gguf");
  write_split(p1, 0, 2, 3, {"a", "b"});
  write_split(p2, 1, 2, std::nullopt, {"c"});
  for (const std::string& entry : {p1, p2}) {
    GgufModel m = GgufModel::open(entry);
    ASSERT_EQ(m.n_splits(), 2u);
    EXPECT_EQ(m.paths(), (std::vector<std::string>{p1, p2}));
    EXPECT_EQ(m.architecture(), "split0");  // metadata of the first split
    ASSERT_EQ(m.tensors().size(), 3u);
    EXPECT_EQ(m.require("a").split, 0u);
    EXPECT_EQ(m.require("b").split, 0u);
    const TensorInfo& c = m.require("c");
    EXPECT_EQ(c.split, 1u);
    EXPECT_EQ(c.offset, m.split(1).data_offset);
    EXPECT_EQ(read_bytes(p2, c.offset, 32), pattern(32, 16));
    EXPECT_EQ(read_bytes(p1, m.require("b").offset, 32), pattern(32, 1));
  }
}

TEST(GgufSplit, MissingSplitIsNamed) {
  TempDir dir;
  const std::string p1 = dir.file("m-00001-of-00003.gguf");
  write_split(p1, 0, 3, std::nullopt, {"a"});
  write_split(dir.file("m-00003-of-00003.gguf"), 2, 3, std::nullopt, {"c"});
  EXPECT_THAT(error_of([&] { GgufModel::open(p1); }),
              AllOf(HasSubstr("m-00002-of-00003.gguf"), HasSubstr("missing split 2 of 3")));
}

TEST(GgufSplit, InconsistentSplitsAreRejected) {
  TempDir dir;
  {
    const std::string p1 = dir.file("d-00001-of-00002.gguf");
    write_split(p1, 0, 2, std::nullopt, {"a"});
    write_split(dir.file("d-00002-of-00002.gguf"), 1, 2, std::nullopt, {"a"});
    EXPECT_THAT(error_of([&] { GgufModel::open(p1); }), HasSubstr("tensor 'a' also appears in"));
  }
  {
    const std::string p1 = dir.file("n-00001-of-00002.gguf");
    write_split(p1, 0, 2, 5, {"a"});
    write_split(dir.file("n-00002-of-00002.gguf"), 1, 2, std::nullopt, {"b"});
    EXPECT_THAT(error_of([&] { GgufModel::open(p1); }), HasSubstr("split.tensors.count is 5 but the splits hold 2"));
  }
  {
    const std::string p1 = dir.file("o-00001-of-00002.gguf");
    write_split(p1, 0, 2, std::nullopt, {"a"});
    write_split(dir.file("o-00002-of-00002.gguf"), 0, 2, std::nullopt, {"b"});  // wrong split.no
    EXPECT_THAT(error_of([&] { GgufModel::open(p1); }), HasSubstr("split.no is 0 but this is split 1"));
  }
  {
    const std::string p = dir.file("renamed.gguf");  // split metadata, but no split name to find the rest
    write_split(p, 0, 2, std::nullopt, {"a"});
    EXPECT_THAT(error_of([&] { GgufModel::open(p); }), HasSubstr("does not follow NAME-00001-of-2.gguf"));
  }
}

}  // namespace
}  // namespace sluice::gguf
