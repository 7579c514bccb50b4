#include "core/tensor.h"

#include <cstdint>
#include <cstdlib>
#include <new>

#ifdef __linux__
#include <sys/mman.h>
#endif

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
  // Large buffers (dummy weights: 15 GB for a 7B in bf16) start on a 2 MB boundary and ask for
  // transparent huge pages before their first touch: with Linux's usual THP setting ("madvise")
  // each 4 KB page is otherwise its own fault and its own TLB entry.
  constexpr size_t kHuge = size_t{2} << 20, kHugeFrom = size_t{64} << 20;
  const size_t align = nbytes >= kHugeFrom ? kHuge : 64;
  if (nbytes > SIZE_MAX - align) throw std::bad_alloc();  // the rounding below would wrap
  const size_t rounded = nbytes == 0 ? align : (nbytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (!p) throw std::bad_alloc();
#ifdef __linux__
  if (align == kHuge) ::madvise(p, rounded, MADV_HUGEPAGE);  // a hint: failure leaves 4 KB pages
#endif
  ptr_.reset(p);
}

void HostBuffer::Free::operator()(void* p) const { std::free(p); }

}  // namespace frugal
