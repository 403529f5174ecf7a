// detinfer's own binary32 exp and log (numerics spec v1). The definition is in
// exp_log_hd.h, shared with the CUDA kernels (kernels/cuda/device_math.h).
#include "kernels/reference/exp_log_hd.h"
#include "kernels/reference/reference.h"

namespace detinfer::kernels::ref {

float exp_f32(float x) { return explog::exp_f32(x); }

float log_f32(float x) { return explog::log_f32(x); }

}  // namespace detinfer::kernels::ref
