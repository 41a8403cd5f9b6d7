// vgpu: cudaDataType_t (values as in CUDA's library_types.h).
#pragma once
typedef enum cudaDataType_t {
  CUDA_R_16F = 2,
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_16BF = 14,
  CUDA_R_32I = 10,
} cudaDataType;
