#include "core/tensor.h"

#include <cstdlib>
#include <new>

#include "core/status.h"

namespace frugal {

Shape::Shape(std::initializer_list<int64_t> d) {
  FRUGAL_CHECK(d.size() <= kMaxDims);
  for (int64_t v : d) dims[static_cast<size_t>(ndim++)] = v;
}

Shape Shape::of(const std::vector<int64_t>& d) {
  FRUGAL_CHECK(d.size() <= kMaxDims);
  Shape s;
  for (int64_t v : d) s.dims[static_cast<size_t>(s.ndim++)] = v;
  return s;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= dims[static_cast<size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (ndim != o.ndim) return false;
  for (int i = 0; i < ndim; ++i)
    if (dims[static_cast<size_t>(i)] != o.dims[static_cast<size_t>(i)]) return false;
  return true;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[static_cast<size_t>(i)]);
  }
  return s + "]";
}

HostBuffer::HostBuffer(size_t nbytes) : size_(nbytes) {
  size_t rounded = (nbytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!p) throw std::bad_alloc();
  ptr_.reset(p);
}

void HostBuffer::Free::operator()(void* p) const { std::free(p); }

}  // namespace frugal
