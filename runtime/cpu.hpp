// ISA detection and the caps (DECONVJIT_MAX_ISA, Options::max_isa).
#pragma once

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::detail {

int vector_lanes(Isa isa);          // f32 lanes per vector register: 16 or 8
int vector_registers(Isa isa);      // 32 or 16
Isa env_isa_cap();                  // DECONVJIT_MAX_ISA, or Isa::best when unset
bool cpu_has_avx512_fp16();         // arithmetic on halves (vfmadd*ph)

}  // namespace deconvjit::detail
