// Reading and writing one descriptor attribute through the cuBLASLt Set/GetAttribute protocol.
#pragma once
#include <cublas_api.h>

#include <cstring>

namespace vgpu::blas {

// An attribute's storage inside a descriptor; null field: not an attribute of the vgpu subset.
struct AttrSlot {
  void* field = nullptr;
  size_t size = 0;
};
template <class T>
AttrSlot slot(T& field) {
  return AttrSlot{&field, sizeof(T)};
}

// Set*Attribute: CUBLAS_STATUS_INVALID_VALUE if buf is null or sizeInBytes does not match the
// size of the attribute's internal storage.
inline cublasStatus_t write_attr(AttrSlot s, const void* buf, size_t size) {
  if (!s.field) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!buf || size != s.size) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(s.field, buf, size);
  return CUBLAS_STATUS_SUCCESS;
}

// Get*Attribute: with sizeInBytes 0, *sizeWritten gets the size needed (INVALID_VALUE if
// sizeWritten is null); else buf must be non-null and sizeInBytes the attribute's exact size,
// and *sizeWritten (when given) gets the bytes written.
inline cublasStatus_t read_attr(AttrSlot s, void* buf, size_t size, size_t* written) {
  if (!s.field) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (size == 0) {
    if (!written) return CUBLAS_STATUS_INVALID_VALUE;
    *written = s.size;
    return CUBLAS_STATUS_SUCCESS;
  }
  if (!buf || size != s.size) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, s.field, size);
  if (written) *written = s.size;
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace vgpu::blas
