// Memory-mapped safetensors reading: one file, or a directory's single model.safetensors or
// sharded model-0000x-of-0000y.safetensors + model.safetensors.index.json. Every header is
// validated strictly (sizes, offsets, overlaps, dtype x shape) and errors name the file and
// tensor. The reader accepts every dtype safetensors names that core/dtype.h knows (the model
// loader narrows that to the float weight dtypes).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"
#include "core/tensor.h"

namespace frugal::model {

struct TensorEntry {
  std::string name;
  std::string file;          // path of the file holding it (for error messages)
  DType dtype = DType::kF32;
  Shape shape;
  const uint8_t* data = nullptr;  // into the mapping; valid while the owner lives
  int64_t nbytes = 0;

  TensorView view() const { return {const_cast<uint8_t*>(data), dtype, shape}; }
};

class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  const std::string& path() const { return file_.path(); }
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorEntry* find(const std::string& name) const;
  void prefetch() const { file_.prefetch(); }

 private:
  Status parse();

  MappedFile file_;
  std::vector<TensorEntry> tensors_;
  std::map<std::string, size_t> by_name_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a model directory (single file or shards).
class SafetensorsSet {
 public:
  // dir holding model.safetensors.index.json (sharded) or model.safetensors.
  static Result<std::unique_ptr<SafetensorsSet>> open_dir(const std::string& dir);
  // One explicit file (tests, reference data).
  static Result<std::unique_ptr<SafetensorsSet>> open_file(const std::string& path);

  const TensorEntry* find(const std::string& name) const;
  // Sorted tensor names.
  std::vector<std::string> names() const;
  size_t size() const { return by_name_.size(); }
  // Hints the kernel to read every file ahead.
  void prefetch() const;

 private:
  Status add_file(std::unique_ptr<SafetensorsFile> f);
  Status load_index(const std::string& dir, const std::string& index_path);

  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorEntry*> by_name_;
};

// Writes tensors as one safetensors file (tests and converters). Shapes are taken as given;
// data must hold dtype_bytes(dtype, numel) bytes.
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
};
Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors);

}  // namespace frugal::model
