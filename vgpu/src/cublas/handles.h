// Registry of the live cuBLAS / cuBLASLt objects (handles and descriptors), so that a destroyed,
// foreign or wrong-kind object passed to an API call is reported instead of being dereferenced.
// Destroyed objects stay in quarantine (not freed) for a while, so their addresses are not reused
// at once and a use after destroy is recognised as such.
#pragma once
#include <cublas_api.h>

#include <initializer_list>
#include <string>

namespace vgpu::blas {

enum class Kind { BlasHandle, LtHandle, MatmulDesc, MatrixLayout, Preference };
const char* kind_name(Kind k);  // "cublasHandle_t", "cublasLtMatmulDesc_t", ...

// Every registered object derives from Object; the registry deletes it when it leaves quarantine.
struct Object {
  virtual ~Object() = default;
};

// Registers a new live object (its Create call); `p` is the handle the caller sees.
void register_object(const void* p, Kind kind, Object* owner);

// Retires a live object (its Destroy call): returns SUCCESS and quarantines it, or returns on_null
// for null (a documented error, not reported), or reports a destroyed / unknown / wrong-kind
// object and returns on_bad.
cublasStatus_t retire_object(const void* p, Kind kind, const char* api, cublasStatus_t on_null, cublasStatus_t on_bad);

// One operand of an API call to validate: the object, what it must be, its parameter name, and
// the status the call documents for it when invalid (handles: CUBLAS_STATUS_NOT_INITIALIZED,
// descriptors: CUBLAS_STATUS_INVALID_VALUE).
struct Use {
  const void* p;
  Kind kind;
  const char* param;  // "lightHandle", "Adesc", ...
  cublasStatus_t status;
};
// Validates all of `uses` under one lock. A null object returns its status (a documented error,
// not reported); a destroyed, unknown or wrong-kind object is reported and returns its status.
cublasStatus_t check_objects(const char* api, std::initializer_list<Use> uses);

}  // namespace vgpu::blas
