// The ISAs this CPU runs and a guard that restores the active ISA: shared by the kernel
// tests that compare every ISA with the reference.
#pragma once

#include <vector>

#include "kernels/kernels.h"

namespace detinfer::kernels::testing {

inline std::vector<Isa> available_isas() {
  std::vector<Isa> v;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512})
    if (isa_supported(isa)) v.push_back(isa);
  return v;
}

// Restores the active ISA on scope exit.
class IsaGuard {
 public:
  IsaGuard() : saved_(active_isa()) {}
  ~IsaGuard() { set_isa(saved_); }
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;

 private:
  Isa saved_;
};

}  // namespace detinfer::kernels::testing
