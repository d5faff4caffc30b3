#pragma once
// TensorEntry: one named tensor inside a checkpoint file (safetensors or
// pytorch_model.bin), viewed in place, and its conversion to a float type.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "seqpar/core/dtype.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::inline v0 {

/// A tensor as stored in a file: dtype, shape, element strides and the bytes
/// from its first element. `strides` is row-major contiguous for safetensors;
/// a pytorch storage view may have others.
struct TensorEntry {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // in elements, same length as shape
  std::span<const std::byte> bytes;   // from the first element to the end of the storage
  std::string file;                   // for error messages

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

namespace detail {
inline std::string shape_string(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

template <class V>
V load_bytes(const std::byte* q) {
  V v;
  std::memcpy(&v, q, sizeof v);
  return v;
}
// f(load, size): load reads one element of `dtype` at a byte pointer as float or double, size
// is its bytes; the one dtype switch of reading, kept out of the callers' loops.
template <class F>
decltype(auto) with_loader(DType dtype, F&& f) {
  using B = const std::byte*;
  switch (dtype) {
    case DType::f32: return f([](B q) { return load_bytes<float>(q); }, 4);
    case DType::f64: return f([](B q) { return load_bytes<double>(q); }, 8);
    case DType::f16: return f([](B q) { return f16_to_float(load_bytes<std::uint16_t>(q)); }, 2);
    case DType::bf16: return f([](B q) { return bf16_to_float(load_bytes<std::uint16_t>(q)); }, 2);
    default: return f([](B) { return 0.0f; }, 1);
  }
}
template <class T>
T load_element(const std::byte* p, DType dtype) {
  return with_loader(dtype, [&](auto load, std::size_t) { return static_cast<T>(load(p)); });
}
// count contiguous elements of `dtype` at p into out.
template <class T>
void convert_row(T* out, const std::byte* p, std::int64_t count, DType dtype) {
  with_loader(dtype, [&](auto load, std::size_t size) {
    for (std::int64_t j = 0; j < count; ++j)
      out[j] = static_cast<T>(load(p + j * static_cast<std::int64_t>(size)));
  });
}
}  // namespace detail

/// Copies `e` into dst (row-major, numel elements) converting F32/F16/BF16/F64 to T.
/// Throws seqpar::Error naming the file and tensor for any other dtype or a view
/// that reaches past its bytes.
template <class T>
void read_tensor(const TensorEntry& e, std::span<T> dst) {
  SEQPAR_CHECK(e.dtype == DType::f32 || e.dtype == DType::f16 || e.dtype == DType::bf16 ||
                   e.dtype == DType::f64,
               e.file, ": tensor '", e.name, "' has dtype ", dtype_name(e.dtype),
               "; expected F32, F16, BF16 or F64");
  const auto n = e.numel();
  SEQPAR_CHECK(static_cast<std::int64_t>(dst.size()) == n, e.file, ": tensor '", e.name, "' has ",
               n, " elements; expected ", dst.size());
  const std::size_t esize = dtype_size(e.dtype);
  const std::size_t rank = e.shape.size();
  // Largest element offset the strides reach must lie inside the bytes.
  std::int64_t last = 0;
  for (std::size_t d = 0; d < rank; ++d)
    if (e.shape[d] > 0) last += (e.shape[d] - 1) * e.strides[d];
  SEQPAR_CHECK(n == 0 || static_cast<std::size_t>(last + 1) * esize <= e.bytes.size(), e.file,
               ": tensor '", e.name, "' reaches past the end of its data");
  const std::byte* base = e.bytes.data();
  // Rows that are contiguous in the file (the common case) convert in one tight loop each.
  const std::int64_t inner = rank == 0 ? 1 : e.shape[rank - 1];
  if (rank == 0 || e.strides[rank - 1] == 1) {
    const std::int64_t rows = inner == 0 ? 0 : n / inner;
    std::vector<std::int64_t> idx(rank > 0 ? rank - 1 : 0, 0);
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t off = 0;
      for (std::size_t d = 0; d + 1 < rank; ++d) off += idx[d] * e.strides[d];
      T* out = dst.data() + r * inner;
      const std::byte* in = base + off * static_cast<std::int64_t>(esize);
      detail::convert_row(out, in, inner, e.dtype);
      for (std::size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < e.shape[d]) break;
        idx[d] = 0;
      }
    }
    return;
  }
  std::vector<std::int64_t> idx(rank, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < rank; ++d) off += idx[d] * e.strides[d];
    dst[static_cast<std::size_t>(i)] =
        detail::load_element<T>(base + off * static_cast<std::int64_t>(esize), e.dtype);
    for (std::size_t d = rank; d-- > 0;) {
      if (++idx[d] < e.shape[d]) break;
      idx[d] = 0;
    }
  }
}

/// Row-major contiguous strides for a shape.
inline std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

}  // namespace seqpar::inline v0
