// safetensors: read (mmap, zero-copy views) and write (atomic), with every validation rule of the
// format (docs/formats.md, "safetensors"). Each error names the file and, where there is one, the
// tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace grpo::io {

enum class DType { BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

size_t dtype_size(DType d);
const char* dtype_name(DType d);
// Parses "BF16" etc.; throws grpo::Error naming `context` and listing the known names.
DType parse_dtype(const std::string& name, const std::string& context);
// "[2,3]": shapes as error messages print them.
std::string format_shape(const std::vector<int64_t>& shape);

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // offsets relative to the start of the data buffer
  int64_t numel() const;
  uint64_t nbytes() const { return end - begin; }
};

// A validated, read-only, memory-mapped safetensors file (or an owned buffer, for tests/fuzzing).
class SafetensorsFile {
public:
  // Opens and validates `path`; throws grpo::Error on any rule violation.
  static SafetensorsFile open(const std::string& path);
  // Validates an in-memory file image; `name` is used in error messages.
  static SafetensorsFile from_bytes(std::string bytes, const std::string& name);

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // sorted by offset
  std::vector<std::string> names() const;                              // sorted by name
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* find(const std::string& name) const;  // nullptr if absent
  const TensorInfo& at(const std::string& name) const;    // throws naming file and tensor
  // Pointer to the tensor's bytes inside the mapping (valid while this object lives). Little-endian,
  // row-major, contiguous; 8-byte aligned when the header length is a multiple of 8 (every
  // reference writer pads it so), otherwise possibly unaligned: copy before reinterpreting.
  const uint8_t* data(const TensorInfo& t) const;

private:
  SafetensorsFile() = default;
  void parse();  // validates the image in map_ and fills the members below
  struct Mapping;
  std::string path_;
  std::unique_ptr<Mapping> map_;
  const uint8_t* buffer_ = nullptr;  // start of the data section
  uint64_t buffer_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// A tensor to write: borrowed bytes (little-endian, row-major, contiguous).
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  uint64_t nbytes = 0;
};

// Serializes like the reference writer: header padded with spaces to a multiple of 8, tensors
// ordered by dtype alignment (descending) then name. Throws on duplicate names or size mismatch.
std::string serialize_safetensors(const std::vector<TensorView>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});
// serialize_safetensors + atomic write (temp file, fsync, rename).
void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace grpo::io
