// Non-owning tensor views and a small owning host buffer. Row-major; strides in elements.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace frugal {

constexpr int kMaxDims = 4;

struct Shape {
  int ndim = 0;
  std::array<int64_t, kMaxDims> dims{};

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);
  static Shape of(const std::vector<int64_t>& d);
  int64_t numel() const;
  int64_t operator[](int i) const { return dims[static_cast<size_t>(i)]; }
  bool operator==(const Shape& o) const;
  std::string to_string() const;  // "[3584, 152064]"
};

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;

  int64_t numel() const { return shape.numel(); }
  int64_t nbytes() const { return dtype_bytes(dtype, numel()); }
  template <typename T> T* as() const { return static_cast<T*>(data); }
};

// An owning, 64-byte aligned host buffer.
class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(size_t nbytes);
  void* data() const { return ptr_.get(); }
  size_t size() const { return size_; }
  template <typename T> T* as() const { return static_cast<T*>(ptr_.get()); }

 private:
  struct Free { void operator()(void* p) const; };
  std::unique_ptr<void, Free> ptr_;
  size_t size_ = 0;
};

}  // namespace frugal
