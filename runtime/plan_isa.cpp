// The plan's first choice: the instruction set its kernel is generated for (TuningHints::isa), at most the
// cap. By default the cap, except on a CPU whose AVX-512 arithmetic runs at the AVX2 rate (Zen 4 splits
// every zmm FMA into two 256-bit halves, cpu_zmm_at_ymm_rate): there a 16-lane vector does the work of two
// 8-lane ones, empty lanes included, so where 8-lane vectors hold the family's channels with clearly fewer
// empty lanes the AVX2 kernel does less arithmetic for the same result.
//
// Measured on Zen 4 (2 threads, every suite and holdout layer, both layouts, the two ISAs' default kernels
// interleaved, docs/data/isa_choice_zen4_2t.jsonl). Of the 438 direct-family rows, on the 379 whose channels
// fill both widths equally AVX-512 is 1.06x faster (more registers, larger blocks); where AVX2 fills 1.3x
// more lanes it is 1.16x faster (34 of 39 rows): 19-24 output channels in 2 zmm against 3 ymm (12 where gemm
// folds two x phases into 24); 40 in 3 against 5 fills only 1.2x more, mixed (0.92-1.29). The dot family
// alike on its input channels (8 of 16 lanes: 1.66x). The rule moves 50 rows, all in the holdout sets (no
// suite layer has such channel counts): f32 1.23x geomean (0.91-1.66; the two below 1.0 are one 20 us
// layer), f16 1.22x on 48 of them (docs/data/isa_choice_f16_changed_zen4_2t.jsonl).
#include "runtime/cpu.hpp"
#include "runtime/plan.hpp"

namespace deconvjit::detail {
namespace {

// The channels along the family's vectors: output channels (the phases' folded ones), or for the dot
// family, which reduces along its vectors, the input channels.
double vector_fill(const Plan& pl) {
  return lane_use(pl.algorithm == Algorithm::dot ? pl.ic_per_group : pl.oc_per_group, pl.lanes);
}

// Hints that count vectors or lanes were written for one width; the rule does not reinterpret them.
bool width_pinned(const TuningHints& h) {
  return h.ur_w || h.oc_vectors || h.ic_unroll || h.ic_block || h.channels_per_call || h.oc_loop || h.oc_chunk;
}

Isa hinted_isa(const TuningHints& h, Isa cap) {
  if (h.isa.empty()) return cap;
  // Exactly the two names the plan prints (isa_from_string also takes "best" and "avx512" for caps).
  const Isa isa = h.isa == "avx2" ? Isa::avx2 : h.isa == "avx512_core" ? Isa::avx512_core : Isa::best;
  check_hint(isa != Isa::best, "isa must be \"avx2\" or \"avx512_core\", not \"" + h.isa.substr(0, 32) + "\"");
  check_hint(isa == Isa::avx2 || cap == Isa::avx512_core,
             "isa " + h.isa + " is above the ISA cap " + std::string(to_string(cap)));
  return isa;
}

}  // namespace

// Only where the two plans take the same family with channel vectors, in f32 or f16 (as measured; bf16
// reduces channel pairs at twice the rate on AVX-512 only), and the 8-lane vectors are mostly full: 1-2
// channels of 8 lanes lost to AVX-512's wider pixel blocks (hed_dsn2_up, lapsrn_img_l1: 0.41x). The
// depthwise family, whose vectors are loads rather than broadcasts, lost where this holds
// (deeplabv3p_logits_up4_b8 0.68x).
bool ymm_fills_better(const Plan& zmm, const Plan& ymm) {
  const Algorithm a = zmm.algorithm;
  const bool family = a == ymm.algorithm && (a == Algorithm::direct || a == Algorithm::gemm || a == Algorithm::dot);
  return family && zmm.dtype != DType::bf16 && vector_fill(ymm) >= 0.75 && vector_fill(ymm) >= 1.3 * vector_fill(zmm);
}

Plan make_plan(const Problem& p, Isa cap, const TuningHints& h, bool zmm_at_ymm_rate) {
  const Isa isa = hinted_isa(h, cap);
  TuningHints rest = h;
  rest.isa.clear();
  Plan pl = make_plan_at(p, isa, rest);
  if (!h.isa.empty() || isa != Isa::avx512_core || !zmm_at_ymm_rate || width_pinned(h) ||
      p.accumulation != DType::f32)
    return pl;
  try {
    Plan ymm = make_plan_at(p, Isa::avx2, rest);
    if (ymm_fills_better(pl, ymm)) return ymm;
  } catch (const Error& e) {
    if (e.kind() != Error::Kind::InvalidArgument) throw;  // hints AVX2 cannot honour: keep AVX-512
  }
  return pl;
}

Plan make_plan(const Problem& p, Isa cap, const TuningHints& h) {
  return make_plan(p, cap, h, cpu_zmm_at_ymm_rate());
}

}  // namespace deconvjit::detail
