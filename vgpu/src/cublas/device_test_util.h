// Test helpers for the cuBLAS / cuBLASLt API tests: host matrices mirrored in vgpu device memory,
// and a cuBLASLt product set up the way ptdp's GemmRunner sets it up (alignment preferences from
// the real pointers, bias pointer optionally set before the heuristic).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "cublas/gemm_test_util.h"

namespace vgpu::blas::testing {

// A HostMatrix with a device copy (its whole storage, so every byte is initialised).
struct DeviceMatrix {
  HostMatrix host;
  void* dev = nullptr;
  explicit DeviceMatrix(HostMatrix h) : host(std::move(h)) {
    EXPECT_EQ(cudaMalloc(&dev, host.bytes.size()), cudaSuccess);
    upload();
  }
  ~DeviceMatrix() { cudaFree(dev); }
  DeviceMatrix(const DeviceMatrix&) = delete;
  DeviceMatrix& operator=(const DeviceMatrix&) = delete;
  void upload() {
    EXPECT_EQ(cudaMemcpy(dev, host.bytes.data(), host.bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  HostMatrix download() const {
    HostMatrix out = host;
    EXPECT_EQ(cudaMemcpy(out.bytes.data(), dev, out.bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
};

inline uint32_t pow2_alignment(uint64_t v) {
  uint32_t a = 1;
  while (a < 256 && v % (uint64_t(a) * 2) == 0) a *= 2;
  return a;
}
// The alignment every batch of an operand keeps (pointer and batch stride), as ptdp computes it.
inline uint32_t operand_alignment(const void* p, const HostMatrix& m) {
  uint32_t a = pow2_alignment(reinterpret_cast<uintptr_t>(p));
  if (m.batch > 1) a = std::min(a, pow2_alignment(uint64_t(m.stride) * dtype_size(m.type)));
  return a;
}

// Descriptors for one cuBLASLt product (destroyed with it).
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtPlan() {
    for (auto* l : {a, b, c, d})
      if (l) cublasLtMatrixLayoutDestroy(l);
    if (op) cublasLtMatmulDescDestroy(op);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
  }
};

inline cublasLtMatrixLayout_t make_layout(const HostMatrix& m) {
  cublasLtMatrixLayout_t l = nullptr;
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&l, m.type, uint64_t(m.rows), uint64_t(m.cols), m.ld), CUBLAS_STATUS_SUCCESS);
  if (m.batch > 1) {
    const int32_t count = int32_t(m.batch);
    EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &m.stride, sizeof(m.stride)),
        CUBLAS_STATUS_SUCCESS);
  }
  return l;
}

inline void set_desc(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr, const void* v, size_t size) {
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(op, attr, v, size), CUBLAS_STATUS_SUCCESS);
}

inline void set_alignments(cublasLtMatmulPreference_t pref, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  const uint32_t v[4] = {a, b, c, d};
  const cublasLtMatmulPreferenceAttributes_t w[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, w[i], &v[i], sizeof(v[i])), CUBLAS_STATUS_SUCCESS);
}

}  // namespace vgpu::blas::testing
