// Element-wise arithmetic of the NCCL subset: sizes of ncclDataType_t, and deterministic
// reductions over the ranks' buffers (rank order, each step rounded to the type as NCCL's are).
#pragma once
#include <nccl.h>

#include <cstddef>
#include <cstdint>

namespace vgpu::nccl {

// Bytes of one element; 0 for a value that is no ncclDataType_t.
size_t dtype_size(int dtype);
const char* dtype_name(int dtype);  // "ncclFloat32", or "invalid"
const char* redop_name(int op);     // "ncclSum", or "invalid"
// Whether reductions with `dtype` are implemented (every type but the fp8 ones).
bool dtype_reducible(int dtype);

// out[i] = inputs[0][i] op inputs[1][i] op ... op inputs[n-1][i], for i < count, combined in
// that order (rank order), so every caller that passes the same inputs gets the same bits.
// Each step's result is rounded to the type, as NCCL's kernels round theirs (16-bit floats:
// combined in f32 and rounded to nearest-even after every rank); integers wrap around (two's
// complement); ncclAvg of floats multiplies each input by 1/n rounded to the type before the sum
// (NCCL's PreMulSum), of integers divides the sum by n; max/min of floats propagate NaN. `out`
// may alias none of the inputs.
void reduce(int dtype, int op, const void* const* inputs, int n, void* out, size_t count);

// IEEE half and bfloat16 conversions (round to nearest even; NaN stays NaN).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

}  // namespace vgpu::nccl
