// io::File — the narrow interface through which sluice reads model bytes.
//
// Everything above io (GGUF parsing, the expert store) reads through File, so
// tests can substitute an in-memory or fault-injecting implementation.
// Contract: read_exact either fills all n bytes or throws sluice::Error naming
// the file, the offset and the cause (short read past EOF, EIO, ...). EINTR and
// short reads are retried. Implementations are safe to call from several
// threads at once (pread has no shared file position).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sluice::io {

class File {
 public:
  virtual ~File() = default;
  virtual const std::string& path() const = 0;
  virtual uint64_t size() const = 0;
  virtual void read_exact(void* dst, size_t n, uint64_t offset) const = 0;
};

struct OpenOptions {
  bool direct = false;  // O_DIRECT: dst, n and offset must then be 4 KiB aligned
};

// Fault-injection hook (tests, fuzzing): given a File the engine just opened,
// returns the File to read through instead (e.g. an io::FaultFile around it).
// Taken by every opener of model files: GgufModel::open (header parse),
// DenseConfig (dense load) and ExpertStoreConfig (expert reads). Empty: none.
using WrapFile = std::function<std::shared_ptr<const File>(std::shared_ptr<const File>)>;

// Opens a regular file read-only. Throws sluice::Error("PATH: cannot open: ...").
std::unique_ptr<File> open_file(const std::string& path, const OpenOptions& opts = {});

// A File over bytes in memory (tests, fuzzing). Owns a copy of the bytes.
std::unique_ptr<File> memory_file(std::string name, std::vector<uint8_t> bytes);

}  // namespace sluice::io
