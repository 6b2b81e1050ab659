#include "runtime/cpu.hpp"

#include <cstdlib>
#include <string>

#include <xbyak/xbyak_util.h>

namespace deconvjit {
namespace {

int rank_of(Isa isa) { return isa == Isa::avx512_core ? 2 : isa == Isa::avx2 ? 1 : 3; }

bool cpu_has(Isa isa) {
  static const Xbyak::util::Cpu cpu;
  using C = Xbyak::util::Cpu;
  // F16C converts f16 data on AVX2 (every AVX2 CPU has it).
  const bool avx2 = cpu.has(C::tAVX2) && cpu.has(C::tFMA) && cpu.has(C::tF16C);
  switch (isa) {
    case Isa::avx2: return avx2;
    case Isa::avx512_core:
      return avx2 && cpu.has(C::tAVX512F) && cpu.has(C::tAVX512BW) && cpu.has(C::tAVX512VL) &&
             cpu.has(C::tAVX512DQ);
    case Isa::best: return avx2;
  }
  return false;
}

}  // namespace

namespace detail {
bool cpu_has_avx512_bf16() {
  static const Xbyak::util::Cpu cpu;
  return cpu.has(Xbyak::util::Cpu::tAVX512_BF16);
}
bool cpu_has_avx512_fp16() {
  static const Xbyak::util::Cpu cpu;
  return cpu.has(Xbyak::util::Cpu::tAVX512_FP16);
}
// Family 19h is Zen 3 and Zen 4; only Zen 4 has AVX-512, and it runs it on 256-bit pipes (AMD's optimization
// guide for family 19h). Zen 5 (1Ah) has 512-bit pipes in its server and desktop parts, so it is not named.
bool cpu_zmm_at_ymm_rate() {
  static const Xbyak::util::Cpu cpu;
  return cpu.has(Xbyak::util::Cpu::tAMD) && cpu.displayFamily == 0x19 && cpu_has(Isa::avx512_core);
}
}  // namespace detail

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::avx2: return "avx2";
    case Isa::avx512_core: return "avx512_core";
    case Isa::best: return "best";
  }
  return "?";
}

Isa isa_from_string(const std::string& s) {
  if (s == "avx2") return Isa::avx2;
  if (s == "avx512_core" || s == "avx512") return Isa::avx512_core;
  if (s == "best" || s == "any" || s.empty()) return Isa::best;
  throw Error(Error::Kind::InvalidArgument,
              "unknown ISA '" + s + "' (expected avx2, avx512_core or best)");
}

bool isa_available(Isa isa) { return cpu_has(isa); }

Isa resolve_isa(Isa requested) {
  const Isa cap = detail::env_isa_cap();
  if (requested != Isa::best && !cpu_has(requested))
    throw Error(Error::Kind::IsaUnavailable,
                std::string("ISA ") + to_string(requested) + " is not available on this CPU");
  Isa limit = requested;
  if (cap != Isa::best && (limit == Isa::best || rank_of(cap) < rank_of(limit))) limit = cap;
  for (Isa isa : {Isa::avx512_core, Isa::avx2}) {
    if (limit != Isa::best && rank_of(isa) > rank_of(limit)) continue;
    if (cpu_has(isa)) return isa;
  }
  throw Error(Error::Kind::IsaUnavailable, "this CPU has neither AVX-512 nor AVX2 with FMA");
}

namespace detail {

int vector_lanes(Isa isa) { return isa == Isa::avx512_core ? 16 : 8; }
int vector_registers(Isa isa) { return isa == Isa::avx512_core ? 32 : 16; }

Isa env_isa_cap() {
  const char* v = std::getenv("DECONVJIT_MAX_ISA");
  if (!v || !*v) return Isa::best;
  return isa_from_string(v);
}

}  // namespace detail
}  // namespace deconvjit
