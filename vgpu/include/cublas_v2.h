// vgpu: the cuBLAS v2 API header: the types and functions of cublas_api.h under their v2 names
// (cublasCreate is cublasCreate_v2, ...), as CUDA's cublas_v2.h maps them.
#pragma once
#include <cublas_api.h>

#define cublasCreate cublasCreate_v2
#define cublasDestroy cublasDestroy_v2
#define cublasGetVersion cublasGetVersion_v2
#define cublasSetStream cublasSetStream_v2
#define cublasGetStream cublasGetStream_v2
#define cublasSetWorkspace cublasSetWorkspace_v2
#define cublasGetPointerMode cublasGetPointerMode_v2
#define cublasSetPointerMode cublasSetPointerMode_v2
