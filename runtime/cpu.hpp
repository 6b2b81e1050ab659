// ISA detection and the caps (DECONVJIT_MAX_ISA, Options::max_isa).
#pragma once

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::detail {

int vector_lanes(Isa isa);          // f32 lanes per vector register: 16 or 8
int vector_registers(Isa isa);      // 32 or 16
Isa env_isa_cap();                  // DECONVJIT_MAX_ISA, or Isa::best when unset
bool cpu_has_avx512_bf16();         // vdpbf16ps
bool cpu_has_avx512_fp16();         // arithmetic on halves (vfmadd*ph)
// AVX-512 on 256-bit FMA pipes (AMD Zen 4, family 19h): a zmm FMA issues as two ymm halves, so 16-lane
// vectors do no more arithmetic per cycle than 8-lane ones, and their empty lanes cost twice as much.
bool cpu_zmm_at_ymm_rate();

}  // namespace deconvjit::detail
