// cuBLASLt handles and descriptors: cublasLtCreate/Destroy, the matmul descriptor, the matrix
// layout and the preference (Create/Destroy/SetAttribute/GetAttribute), with the documented
// defaults and attribute sizes; attributes outside the vgpu subset return NOT_SUPPORTED.
#include <cublasLt.h>
#include <vgpu/runtime.h>

#include <new>

#include "cublas/attr_io.h"
#include "cublas/handles.h"
#include "cublas/lt_objects.h"

using vgpu::blas::AttrSlot;
using vgpu::blas::Kind;
using vgpu::blas::slot;

namespace vgpu::blas {

cublasLtMatmulAlgo_t encode_algo(const AlgoRecord& r) {
  cublasLtMatmulAlgo_t a{};
  a.data[0] = AlgoRecord::kMagic;
  for (int i = 0; i < 4; ++i) a.data[1 + i] = r.align[i];
  a.data[5] = r.bias_align;
  return a;
}

bool decode_algo(const cublasLtMatmulAlgo_t& a, AlgoRecord* r) {
  if (a.data[0] != AlgoRecord::kMagic) return false;
  for (int i = 0; i < 4; ++i) r->align[i] = uint32_t(a.data[1 + i]);
  r->bias_align = uint32_t(a.data[5]);
  return true;
}

}  // namespace vgpu::blas

namespace {

template <class T>
cublasStatus_t create(T** out, Kind kind) {
  if (!out) return CUBLAS_STATUS_INVALID_VALUE;
  T* obj = new (std::nothrow) T;
  if (!obj) return CUBLAS_STATUS_ALLOC_FAILED;
  vgpu::blas::register_object(obj, kind, obj);
  *out = obj;
  return CUBLAS_STATUS_SUCCESS;
}

AttrSlot desc_slot(cublasLtMatmulDescOpaque_t* d, cublasLtMatmulDescAttributes_t attr) {
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
      return slot(d->compute);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
      return slot(d->scale);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
      return slot(d->pointer_mode);
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return slot(d->transa);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return slot(d->transb);
    case CUBLASLT_MATMUL_DESC_TRANSC:
      return slot(d->transc);
    case CUBLASLT_MATMUL_DESC_FILL_MODE:
      return slot(d->fill);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return slot(d->epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return slot(d->bias);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
      return slot(d->bias_stride);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      return slot(d->bias_type);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      return slot(d->aux);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
      return slot(d->aux_ld);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
      return slot(d->aux_stride);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
      return slot(d->aux_type);
    case CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET:
      return slot(d->sm_count);
    default:
      return {};  // fp8 scales, amax: not in the vgpu subset
  }
}

AttrSlot layout_slot(cublasLtMatrixLayoutOpaque_t* l, cublasLtMatrixLayoutAttribute_t attr) {
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE:
      return slot(l->type);
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
      return slot(l->order);
    case CUBLASLT_MATRIX_LAYOUT_ROWS:
      return slot(l->rows);
    case CUBLASLT_MATRIX_LAYOUT_COLS:
      return slot(l->cols);
    case CUBLASLT_MATRIX_LAYOUT_LD:
      return slot(l->ld);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
      return slot(l->batch);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
      return slot(l->stride);
    case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET:
      return slot(l->plane_offset);
    default:
      return {};
  }
}

AttrSlot pref_slot(cublasLtMatmulPreferenceOpaque_t* p, cublasLtMatmulPreferenceAttributes_t attr) {
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE:
      return slot(p->search);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return slot(p->max_workspace);
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
      return slot(p->reduction_mask);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
      return slot(p->align[0]);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
      return slot(p->align[1]);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
      return slot(p->align[2]);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return slot(p->align[3]);
    case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT:
      return slot(p->max_waves);
    case CUBLASLT_MATMUL_PREF_IMPL_MASK:
      return slot(p->impl_mask);
    default:
      return {};
  }
}

// A null descriptor is a documented CUBLAS_STATUS_INVALID_VALUE; a destroyed or foreign one is
// reported as well.
cublasStatus_t check_one(const char* api, const void* p, Kind kind, const char* param) {
  return vgpu::blas::check_objects(api, {{p, kind, param, CUBLAS_STATUS_INVALID_VALUE}});
}

}  // namespace

extern "C" {

// cublasLtCreate: CUBLAS_STATUS_NOT_INITIALIZED when the CUDA runtime cannot be initialised
// (here: no virtual device), CUBLAS_STATUS_INVALID_VALUE for a null lightHandle.
cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle) {
  if (!lightHandle) return CUBLAS_STATUS_INVALID_VALUE;
  if (vgpu::device_count() == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  const cublasStatus_t s = create(lightHandle, Kind::LtHandle);
  if (s == CUBLAS_STATUS_SUCCESS) (*lightHandle)->device = vgpu::current_device();
  return s;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  return vgpu::blas::retire_object(lightHandle, Kind::LtHandle, "cublasLtDestroy", CUBLAS_STATUS_NOT_INITIALIZED,
                                   CUBLAS_STATUS_NOT_INITIALIZED);
}

size_t cublasLtGetVersion(void) { return 130000; }

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  const cublasStatus_t s = create(matmulDesc, Kind::MatmulDesc);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  (*matmulDesc)->compute = computeType;
  (*matmulDesc)->scale = scaleType;
  return s;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  return vgpu::blas::retire_object(matmulDesc, Kind::MatmulDesc, "cublasLtMatmulDescDestroy",
                                   CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_INVALID_VALUE);
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t sizeInBytes) {
  const cublasStatus_t s = check_one("cublasLtMatmulDescSetAttribute", matmulDesc, Kind::MatmulDesc, "matmulDesc");
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  return vgpu::blas::write_attr(desc_slot(matmulDesc, attr), buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              void* buf, size_t sizeInBytes, size_t* sizeWritten) {
  const cublasStatus_t s = check_one("cublasLtMatmulDescGetAttribute", matmulDesc, Kind::MatmulDesc, "matmulDesc");
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  return vgpu::blas::read_attr(desc_slot(matmulDesc, attr), buf, sizeInBytes, sizeWritten);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  const cublasStatus_t s = create(matLayout, Kind::MatrixLayout);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  (*matLayout)->type = uint32_t(type);
  (*matLayout)->rows = rows;
  (*matLayout)->cols = cols;
  (*matLayout)->ld = ld;
  return s;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  return vgpu::blas::retire_object(matLayout, Kind::MatrixLayout, "cublasLtMatrixLayoutDestroy",
                                   CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_INVALID_VALUE);
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t sizeInBytes) {
  const cublasStatus_t s = check_one("cublasLtMatrixLayoutSetAttribute", matLayout, Kind::MatrixLayout, "matLayout");
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  return vgpu::blas::write_attr(layout_slot(matLayout, attr), buf, sizeInBytes);
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
                                                void* buf, size_t sizeInBytes, size_t* sizeWritten) {
  const cublasStatus_t s = check_one("cublasLtMatrixLayoutGetAttribute", matLayout, Kind::MatrixLayout, "matLayout");
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  return vgpu::blas::read_attr(layout_slot(matLayout, attr), buf, sizeInBytes, sizeWritten);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  return create(pref, Kind::Preference);
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  return vgpu::blas::retire_object(pref, Kind::Preference, "cublasLtMatmulPreferenceDestroy",
                                   CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_INVALID_VALUE);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t sizeInBytes) {
  const cublasStatus_t s = check_one("cublasLtMatmulPreferenceSetAttribute", pref, Kind::Preference, "pref");
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  return vgpu::blas::write_attr(pref_slot(pref, attr), buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void* buf,
                                                    size_t sizeInBytes, size_t* sizeWritten) {
  const cublasStatus_t s = check_one("cublasLtMatmulPreferenceGetAttribute", pref, Kind::Preference, "pref");
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  return vgpu::blas::read_attr(pref_slot(pref, attr), buf, sizeInBytes, sizeWritten);
}

}  // extern "C"
