// Hand-made GGUF bytes, valid and corrupt: the parser must accept the valid
// ones with exact offsets and reject every corruption with a clear Error
// (never crash, never read out of bounds — run these under ASan).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "gguf/gguf.h"
#include "io/fault_file.h"
#include "io/file.h"
#include "io/read_fully.h"
#include "util/error.h"

namespace sluice::gguf {
namespace SLUICE_TEST_FILE {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Little-endian GGUF byte builder.
struct Bytes {
  std::vector<uint8_t> b;
  Bytes& u8(uint8_t v) { b.push_back(v); return *this; }
  Bytes& u32(uint32_t v) { return raw(&v, 4); }
  Bytes& u64(uint64_t v) { return raw(&v, 8); }
  Bytes& raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
  Bytes& str(const std::string& s) { u64(s.size()); return raw(s.data(), s.size()); }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return u32(0x46554747).u32(version).u64(n_tensors).u64(n_kv);
  }
  Bytes& kv_u32(const std::string& k, uint32_t v) { return str(k).u32(4).u32(v); }
  Bytes& kv_str(const std::string& k, const std::string& v) { return str(k).u32(8).str(v); }
  Bytes& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) u64(d);
    return u32(type).u64(offset);
  }
  Bytes& pad(size_t align) {
    while (b.size() % align) b.push_back(0);
    return *this;
  }
  Bytes& data(size_t n) {
    for (size_t k = 0; k < n; ++k) b.push_back(static_cast<uint8_t>(k));
    return *this;
  }
};

ParsedFile parse_bytes(const std::vector<uint8_t>& b) { return parse(*io::memory_file("t.gguf", b)); }

std::string error_of(const std::vector<uint8_t>& b) {
  try {
    parse_bytes(b);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A small valid file: 2 kvs, tensors "t" F32 {4} at 0 and "u" Q4_0 {32, 2} at 32.
std::vector<uint8_t> valid_file() {
  Bytes f;
  f.header(2, 2).kv_str("general.architecture", "llama").kv_u32("n", 7);
  f.tensor("t", {4}, 0, 0).tensor("u", {32, 2}, 2, 32).pad(32).data(32 + 36);
  return f.b;
}

TEST(GgufCorrupt, ValidHandMadeFileParsesWithExactOffsets) {
  const auto b = valid_file();
  const ParsedFile pf = parse_bytes(b);
  // Header: 24 + kv1 (8+20 + 4 + 8+5 = 45) + kv2 (8+1 + 4 + 4 = 17) + t (8+1+4+8+4+8 = 33)
  //         + u (8+1+4+16+4+8 = 41) = 160, already a multiple of 32.
  EXPECT_EQ(pf.data_offset, 160u);
  EXPECT_EQ(pf.file_size, 160u + 68u);
  ASSERT_EQ(pf.tensors.size(), 2u);
  EXPECT_EQ(pf.tensors[0].offset, 160u);
  EXPECT_EQ(pf.tensors[0].bytes, 16u);
  EXPECT_EQ(pf.tensors[1].offset, 192u);
  EXPECT_EQ(pf.tensors[1].bytes, 36u);
  EXPECT_EQ(pf.version, 3u);
  EXPECT_EQ(pf.metadata.get_uint("n"), 7u);
}

TEST(GgufCorrupt, VersionTwoIsAccepted) {
  auto b = valid_file();
  b[4] = 2;
  EXPECT_EQ(parse_bytes(b).version, 2u);
}

TEST(GgufCorrupt, EveryTruncationThrows) {
  const auto b = valid_file();
  for (size_t n = 0; n < b.size(); ++n) {
    const std::vector<uint8_t> prefix(b.begin(), b.begin() + n);
    EXPECT_THAT(error_of(prefix), HasSubstr("t.gguf: ")) << "prefix of " << n << " bytes";
  }
  // Cut inside the value's string length (24 header + 28 key + 4 type + 2).
  Bytes one;
  one.header(0, 1).kv_str("general.architecture", "llama");
  EXPECT_THAT(error_of({one.b.begin(), one.b.begin() + 58}),
              AllOf(HasSubstr("truncated"), HasSubstr("'general.architecture'"), HasSubstr("offset 56")));
}

TEST(GgufCorrupt, EveryByteCorruptionThrowsErrorOrParses) {
  // Not a behavioural assertion per byte: the point is that no corruption crashes
  // or escapes as anything but sluice::Error (checked under ASan/UBSan).
  const auto good = valid_file();
  size_t rejected = 0;
  for (size_t k = 0; k < good.size(); ++k) {
    for (uint8_t v : {uint8_t{0}, uint8_t{1}, uint8_t{0x7f}, uint8_t{0x80}, uint8_t{0xff}}) {
      auto b = good;
      b[k] = v;
      try {
        parse_bytes(b);
      } catch (const Error&) {
        ++rejected;
      }
    }
  }
  EXPECT_GT(rejected, good.size());  // most header bytes matter
}

TEST(GgufCorrupt, MagicAndVersion) {
  auto b = valid_file();
  b[0] = 'X';
  EXPECT_THAT(error_of(b), AllOf(HasSubstr("t.gguf"), HasSubstr("bad magic")));
  b = valid_file();
  b[4] = 1;
  EXPECT_THAT(error_of(b), HasSubstr("version 1 is not supported"));
  b[4] = 4;
  EXPECT_THAT(error_of(b), HasSubstr("unsupported GGUF version 4"));
  EXPECT_THAT(error_of({'G', 'G'}), HasSubstr("not a GGUF file"));
}

TEST(GgufCorrupt, ImpossibleCountsAreRejectedBeforeAllocating) {
  Bytes f;
  f.header(0, uint64_t{1} << 60).kv_u32("n", 1);
  EXPECT_THAT(error_of(f.b), HasSubstr("metadata entries cannot fit"));
  Bytes g;
  g.header(UINT64_MAX, 0);
  EXPECT_THAT(error_of(g.b), HasSubstr("tensors cannot fit"));
  // A kv count that fits the file size bound but not the actual content.
  Bytes h;
  h.header(0, 3).kv_u32("n", 1).data(40);
  EXPECT_THROW(parse_bytes(h.b), Error);
}

TEST(GgufCorrupt, HugeStringAndArrayLengths) {
  Bytes f;
  f.header(0, 1).u64(UINT64_MAX - 3).raw("key", 3).data(40);
  EXPECT_THAT(error_of(f.b), HasSubstr("runs past the end of the file"));
  Bytes g;
  g.header(0, 1).str("k").u32(8).u64(uint64_t{1} << 40).raw("abc", 3);
  EXPECT_THAT(error_of(g.b), AllOf(HasSubstr("metadata key 'k'"), HasSubstr("string length 1099511627776")));
  Bytes h;
  h.header(0, 1).str("arr").u32(9).u32(8).u64(uint64_t{1} << 59).str("x");
  EXPECT_THAT(error_of(h.b), AllOf(HasSubstr("'arr'"), HasSubstr("cannot fit")));
  Bytes i;  // array of u64 whose count is plausible for 1-byte elements but not 8-byte ones
  i.header(0, 1).str("arr").u32(9).u32(10).u64(5).data(16);
  EXPECT_THAT(error_of(i.b), HasSubstr("cannot fit"));
}

TEST(GgufCorrupt, BadValueTypes) {
  Bytes f;
  f.header(0, 1).str("k").u32(13).u32(0);
  EXPECT_THAT(error_of(f.b), AllOf(HasSubstr("'k'"), HasSubstr("unknown value type 13")));
  Bytes g;
  g.header(0, 1).str("k").u32(9).u32(77).u64(0);
  EXPECT_THAT(error_of(g.b), HasSubstr("unknown element type 77"));
  Bytes h;
  h.header(0, 1).str("b").u32(7).u8(2);
  EXPECT_THAT(error_of(h.b), HasSubstr("not 0 or 1"));
}

TEST(GgufCorrupt, NestingDepthIsLimited) {
  auto nested = [](int depth) {
    Bytes f;
    f.header(0, 1).str("deep").u32(9);
    for (int d = 1; d < depth; ++d) f.u32(9).u64(1);  // array of one array ...
    f.u32(4).u64(1).u32(42);                           // ... of one u32
    return f.b;
  };
  const ParsedFile ok = parse_bytes(nested(3));
  EXPECT_EQ(ok.metadata.find("deep")->array[0].array[0].array[0].u, 42u);
  EXPECT_THAT(error_of(nested(100)), HasSubstr("nested deeper than"));
}

TEST(GgufCorrupt, DuplicateKeysAndTensorNames) {
  Bytes f;
  f.header(0, 2).kv_u32("n", 1).kv_u32("n", 2);
  EXPECT_THAT(error_of(f.b), HasSubstr("duplicate metadata key 'n'"));
  Bytes g;
  g.header(2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad(32).data(64);
  EXPECT_THAT(error_of(g.b), HasSubstr("duplicate tensor name 'w'"));
}

std::string tensor_error(std::vector<uint64_t> ne, uint32_t type, uint64_t offset = 0, size_t data = 4096) {
  Bytes f;
  f.header(1, 0).tensor("blk.0.x", std::move(ne), type, offset).pad(32).data(data);
  return error_of(f.b);
}

TEST(GgufCorrupt, BadTensorShapesAndTypes) {
  EXPECT_EQ(tensor_error({4}, 0), "(no error)");
  EXPECT_THAT(tensor_error({}, 0), HasSubstr("has 0 dimensions"));
  EXPECT_THAT(tensor_error({1, 1, 1, 1, 1}, 0), HasSubstr("has 5 dimensions"));
  EXPECT_THAT(tensor_error({4, 0}, 0), AllOf(HasSubstr("'blk.0.x'"), HasSubstr("zero dimension")));
  EXPECT_THAT(tensor_error({uint64_t{1} << 32, uint64_t{1} << 32}, 0), HasSubstr("overflows"));
  EXPECT_THAT(tensor_error({uint64_t{1} << 62, 2}, 0), HasSubstr("overflows"));  // beyond int64
  EXPECT_THAT(tensor_error({uint64_t{1} << 62}, 0), HasSubstr("byte size overflows"));  // x4 bytes
  EXPECT_THAT(tensor_error({4}, 99), HasSubstr("tensor 'blk.0.x' has unknown type 99"));
  EXPECT_THAT(tensor_error({4}, 4), AllOf(HasSubstr("unknown type 4"), HasSubstr("removed")));
  EXPECT_THAT(tensor_error({33}, 2), AllOf(HasSubstr("row length 33"), HasSubstr("block size 32")));
}

TEST(GgufCorrupt, BadTensorOffsets) {
  EXPECT_THAT(tensor_error({4}, 0, 16), AllOf(HasSubstr("'blk.0.x'"), HasSubstr("not a multiple of the alignment 32")));
  EXPECT_THAT(tensor_error({1024}, 0, 0, 4095), HasSubstr("beyond the end of the file"));
  EXPECT_THAT(tensor_error({4}, 0, uint64_t{1} << 63), HasSubstr("beyond the end of the file"));
  EXPECT_THAT(tensor_error({4}, 0, UINT64_MAX - 31), HasSubstr("beyond the end of the file"));  // wraps
  Bytes f;
  f.header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).pad(32).data(64);
  EXPECT_THAT(error_of(f.b), AllOf(HasSubstr("'a' and 'b' overlap")));
}

TEST(GgufCorrupt, Alignment) {
  auto with_alignment = [](uint32_t a, uint64_t offset) {
    Bytes f;
    f.header(1, 1).kv_u32("general.alignment", a).tensor("t", {4}, 0, offset);
    f.pad(a && a <= 4096 ? a : 32).data(offset + 16);
    return f.b;
  };
  const ParsedFile pf = parse_bytes(with_alignment(64, 64));
  EXPECT_EQ(pf.alignment, 64u);
  EXPECT_EQ(pf.data_offset % 64, 0u);
  EXPECT_EQ(pf.tensors[0].offset, pf.data_offset + 64);
  EXPECT_THAT(error_of(with_alignment(64, 32)), HasSubstr("alignment 64"));
  EXPECT_THAT(error_of(with_alignment(0, 0)), HasSubstr("general.alignment is 0"));
  EXPECT_THAT(error_of(with_alignment(48, 0)), HasSubstr("not a power of two"));
  Bytes s;
  s.header(0, 1).kv_str("general.alignment", "32");
  EXPECT_THAT(error_of(s.b), AllOf(HasSubstr("'general.alignment'"), HasSubstr("string")));
}

// ---- Faults injected into the header parse of a real file (GgufModel::open's wrap) ----

struct FaultyOpen {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("sluice-gguf-fault-" + std::to_string(::getpid()) + ".gguf"))
                         .string();
  std::shared_ptr<io::FaultFile> made;
  FaultyOpen() {
    const auto b = valid_file();
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  }
  ~FaultyOpen() { std::filesystem::remove(path); }
  GgufModel open(const io::FaultPlan& plan) {
    return GgufModel::open(path, [this, plan](std::shared_ptr<const io::File> f) -> std::shared_ptr<const io::File> {
      made = std::make_shared<io::FaultFile>(std::move(f), plan);
      return made;
    });
  }
  std::string error(const io::FaultPlan& plan) {
    try {
      open(plan);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }
};

TEST(GgufFaults, EioDuringHeaderParseNamesFileAndOffset) {
  FaultyOpen f;
  io::FaultPlan plan;
  plan.fail_read = 1;  // the parser reads a small file's header in one read
  EXPECT_THAT(f.error(plan), AllOf(HasSubstr(f.path), HasSubstr("at offset 0"), HasSubstr("Input/output error")));
  EXPECT_EQ(f.made->calls(), 1u);
}

TEST(GgufFaults, EarlyEndOfFileDuringHeaderParseIsAnError) {
  FaultyOpen f;
  io::FaultPlan plan;
  plan.eof_at = 50;  // inside the first key/value pair
  EXPECT_THAT(f.error(plan), AllOf(HasSubstr(f.path), HasSubstr("unexpected end of file after 50 bytes")));
}

TEST(GgufFaults, ShortReadsAndEintrDuringHeaderParseAreRetried) {
  FaultyOpen f;
  io::FaultPlan plan;
  plan.max_bytes_per_raw = 3;
  plan.eintr_every = 2;
  const GgufModel m = f.open(plan);
  EXPECT_GT(f.made->injected_eintr(), 0u);
  ASSERT_EQ(m.tensors().size(), 2u);
  EXPECT_EQ(m.tensors()[1].offset, 192u);
  EXPECT_EQ(m.metadata().get_uint("n"), 7u);
}

TEST(GgufFaults, EndlessEintrDuringHeaderParseEndsInAnError) {
  FaultyOpen f;
  io::FaultPlan plan;
  plan.eintr_every = 1;
  EXPECT_THAT(f.error(plan), AllOf(HasSubstr(f.path), HasSubstr("Interrupted system call")));
  EXPECT_EQ(f.made->raw_attempts(), static_cast<uint64_t>(io::kMaxInterrupts) + 1);  // bounded, then gave up
}

}  // namespace
}  // namespace sluice::gguf
