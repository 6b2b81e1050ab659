// The plan space an autotuner searches (enumerate_plans). Built from the planner itself: every
// combination of hints is offered to make_plan, which rejects what the emitters cannot build, and the
// accepted plans are told apart by their complete choices. So the space never drifts from what the
// planner honours, and every candidate's hints rebuild it exactly.
#include <algorithm>
#include <array>
#include <chrono>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <oneapi/tbb/task_arena.h>

#include "runtime/cost_model.hpp"
#include "runtime/cpu.hpp"
#include "runtime/hints.hpp"
#include "runtime/int_math.hpp"
#include "runtime/plan.hpp"

namespace deconvjit {
namespace detail {
namespace {

// The ladder of a numeric choice: powers of two up to `limit`, and the heuristic's own value.
std::vector<int> ladder(int64_t limit, int heuristic) {
  std::vector<int> v;
  for (int64_t x = 1; x <= std::max<int64_t>(1, limit) && x <= (1 << 20); x *= 2) v.push_back(static_cast<int>(x));
  if (std::find(v.begin(), v.end(), heuristic) == v.end()) v.push_back(heuristic);
  return v;
}

bool try_plan(const Problem& p, Isa isa, const TuningHints& h, Plan& out) {
  try {
    out = make_plan(p, isa, h);
    return true;
  } catch (const Error& e) {
    if (e.kind() != Error::Kind::InvalidArgument) throw;
    return false;
  }
}

// Instruction set, family, layout route, halo and batch blocking: the shapes of computation. Under an
// AVX-512 cap, AVX2 code too (the planner may choose it: runtime/plan_isa.cpp), every candidate naming its
// ISA so that none is left to that rule.
std::vector<Plan> structures(const Problem& p, Isa cap) {
  static const char* const kAlgorithms[] = {"direct", "gemm", "depthwise", "dot", "depthwise_x", "gemm_x", "col", "dot_x", "col_x"};
  std::vector<std::string> layouts{""};
  if (p.data_format == DataFormat::NCX) layouts = {"", "row_buffer", "in_kernel", "scratch", "src_copy", "src_in_place", "nxc", "plane_tiles"};
  std::vector<Plan> out;
  std::set<std::string> seen;
  const std::vector<Isa> isas = cap == Isa::avx512_core ? std::vector<Isa>{cap, Isa::avx2} : std::vector<Isa>{cap};
  for (Isa isa : isas) {
    for (const char* algorithm : kAlgorithms)
      for (const std::string& layout : layouts)
        for (int halo : {0, 1})
          for (int batch_block : {0, 1})
            for (int pairs : {0, 1}) {  // (ic_pairs: bf16 only; elsewhere the planner refuses 1)
              TuningHints h;
              h.isa = to_string(isa);
              h.algorithm = algorithm;
              if (h.algorithm != "col")
                h.layout = layout, h.x_halo = halo, h.batch_block = batch_block, h.ic_pairs = pairs;
              Plan pl;
              if (!try_plan(p, cap, h, pl)) continue;
              TuningHints key = pl.choices;  // the structure: what was asked, as the planner resolved it
              key.ur_w = key.oc_vectors = key.ic_unroll = key.x_split = key.ic_block = key.parallel = key.oc_loop = 0;
              key.channels_per_call = key.rows_per_block = key.oc_chunk = key.row_chunk = key.weight_regs = 0;
              key.flat_plane = -1;
              if (seen.insert(hints_key_text(key)).second) out.push_back(pl);
            }
  }
  return out;
}

// Pixels (or vectors) one register block can span. A wider block is accepted by the planner but only
// adds functions no call runs, so the space leaves it out.
int64_t block_extent(const Plan& pl) {
  const Axis &y = pl.axes[1], &x = pl.axes[2];
  switch (pl.algorithm) {
    case Algorithm::gemm_x: return pl.flat_plane ? ceil_div(y.in * x.in, pl.lanes) : ceil_div(x.in, pl.lanes);
    case Algorithm::depthwise_x:
    case Algorithm::dot_x: return ceil_div(x.out, x_vector_span(pl));
    case Algorithm::col_x:  // (batch_block: the images of a tile; the planner wants them to divide the batch)
      return pl.block_over_batch ? std::min<int64_t>(4, pl.batch) : ceil_div(x.in, pl.lanes);
    default: return pl.block_over_batch ? pl.batch : ceil_div(x.out, x.stride);
  }
}

// A plan's choices with the numeric ones (those numeric() enumerates) left to it: its register tile.
TuningHints tile_of(TuningHints h) {
  h.ic_unroll = h.x_split = h.oc_loop = h.channels_per_call = h.oc_chunk = h.row_chunk = 0;
  // Fused x taps hold the taps' weights in registers, so a fused default would refuse the wider tiles;
  // numeric() tries both wherever a tile allows them.
  h.fuse_x_taps = -1;
  return h;
}

// Register tiles that fit, over the family's own tile fields.
std::vector<TuningHints> tiles(const Problem& p, Isa isa, const Plan& base) {
  TuningHints h = base.choices;
  std::vector<TuningHints> out;
  if (base.algorithm == Algorithm::col) return {h};
  const bool gemm_x = base.algorithm == Algorithm::gemm_x, col_x = base.algorithm == Algorithm::col_x;
  // (gemm_x and col_x count channels in oc_vectors, and input vectors in ur_w; gemm_x more than 3 only in wide
  // blocks, 8 at most: 16 and 24 ran no faster; on AVX2 3 vectors and 12 accumulators)
  const bool ymm = base.isa == Isa::avx2;  // (col_x there: 2 vectors, 12 accumulators)
  const int max_ur = gemm_x ? (ymm ? 3 : 8) : col_x ? (ymm ? 2 : 4) : 32;
  const int max_nv = gemm_x ? (ymm ? 12 : 24) : col_x ? (ymm ? 12 : 28) : 8;
  const std::vector<int> rows = gemm_x ? std::vector<int>{1, 2, 3, static_cast<int>(base.axes[1].in)} : std::vector<int>{0};
  const std::vector<int> flat = gemm_x ? std::vector<int>{0, 1} : std::vector<int>{-1};
  h = tile_of(h);
  // AVX2 row tiles also with one or two of their weight vectors read by the FMAs (Plan::weight_regs), after
  // the tile that keeps them all (the cost model does not tell them apart: ties keep this order). Not where
  // the block has no more vectors than it would keep: the same code.
  const bool wr_choice = weight_regs_possible(base);
  for (int f : flat)
    for (int r : rows)
      for (int nv = 1; nv <= max_nv; ++nv)
        for (int wr = wr_choice ? nv : 0; wr >= (wr_choice ? std::max(1, nv - 2) : 0); --wr)
          for (int ur = 1; ur <= max_ur; ++ur) {
            h.flat_plane = f, h.rows_per_block = r, h.oc_vectors = nv, h.ur_w = ur, h.weight_regs = wr;
            Plan pl;
            if (!try_plan(p, isa, h, pl) || pl.ur_w > block_extent(pl)) continue;
            if (wr < nv && pl.main.vectors <= wr) continue;
            out.push_back(h);
          }
  return out;
}

// The numeric choices of one tile: unroll, row split, reduction passes, threading and family blocking.
void numeric(const Problem& p, Isa isa, const TuningHints& tile, std::set<std::string>& seen,
             std::vector<Plan>& out) {
  Plan base;
  if (!try_plan(p, isa, tile, base)) return;
  if (base.algorithm == Algorithm::col) {
    if (seen.insert(hints_key_text(base.choices)).second) out.push_back(base);
    return;
  }
  const Axis& x = base.axes[2];
  const int64_t extent = base.block_over_batch ? base.batch : ceil_div(x.out, x.stride);
  std::vector<int> ic_blocks{static_cast<int>(base.ic_per_group)};
  for (int64_t passes : {2, 4, 8})
    if (base.ic_per_group % passes == 0 && (base.ic_per_group / passes) % base.lanes == 0)
      ic_blocks.push_back(static_cast<int>(base.ic_per_group / passes));
  // Plane tiles: channels_per_call counts whole blocks of the tile, and oc_loop walks the tile's (0: all).
  const bool tiles = base.layout == LayoutPath::ncx_plane_tiles;
  const int64_t cpc_unit = base.oc_vectors * (tiles ? base.lanes : 1);
  const std::vector<int> oc_loops{1, tiles ? 0 : static_cast<int>(base.oc_blocks)};
  const int64_t groups = ceil_div(base.axes[1].in, base.rows_per_block);
  std::vector<int> cpc{0};
  if (base.algorithm == Algorithm::depthwise_x)
    cpc = ladder(ceil_div(p.c_out, cpc_unit), static_cast<int>(base.channels_per_call / cpc_unit));
  if (tiles) {  // every whole number of blocks that divides the channels (a tile cannot hold a tail)
    cpc.clear();
    for (int64_t d = 1; d <= p.c_out / cpc_unit; ++d)
      if (p.c_out % (d * cpc_unit) == 0) cpc.push_back(static_cast<int>(d));
  }
  const bool gx = base.algorithm == Algorithm::gemm_x;
  const std::vector<int> oc_chunks = gx ? ladder(base.oc_blocks, static_cast<int>(base.oc_chunk)) : std::vector<int>{0};
  const std::vector<int> row_chunks = gx ? ladder(groups, static_cast<int>(base.row_chunk)) : std::vector<int>{0};
  // Non-temporal stores both ways where the plan can have them (the planner refuses them with ic passes).
  const std::vector<int> nts = nt_stores_possible(base) ? std::vector<int>{0, 1} : std::vector<int>{-1};
  const std::vector<int> packs = gx ? std::vector<int>{0, 1} : std::vector<int>{-1};
  const std::vector<int> widens = widen_src_possible(base) ? std::vector<int>{0, 1} : std::vector<int>{-1};
  Plan widened = base;  // (NXC bands, and bf16 dot's fused taps, need a widened source: enumerated beside it)
  widened.widen_src = widen_src_possible(base);
  widened.bf16_even_odd = widened.bf16_even_odd && !widened.widen_src;
  const Plan& banded = band_possible(base) ? base : widened;
  const std::vector<int> bands = band_possible(banded)
                                     ? std::vector<int>{0, static_cast<int>(default_band_rows(banded))}
                                     : std::vector<int>{-1};
  const bool fusable = fuse_x_possible(base) || fuse_x_possible(widened);
  const std::vector<int> fuses = fusable ? std::vector<int>{0, 1} : std::vector<int>{-1};
  const std::vector<int> edges = edge_blocks_possible(base) ? std::vector<int>{0, 1} : std::vector<int>{-1};
  const std::vector<int> prefetches = prefetch_src_possible(base) ? std::vector<int>{0, 1} : std::vector<int>{-1};
  // (group_inner: also where the base plan bands its rows, which the hint turns off)
  const bool grouped_rows = base.groups > 1 && reducing_row_family(base.algorithm);
  const std::vector<int> inners = grouped_rows ? std::vector<int>{0, 1} : std::vector<int>{-1};
  // (oc_inner: refused by the planner where the base has one channel block, or with the group innermost)
  const bool block_rows = base.algorithm == Algorithm::direct || base.algorithm == Algorithm::gemm;
  const std::vector<int> oc_inners = block_rows && base.oc_blocks > 1 ? std::vector<int>{0, 1} : std::vector<int>{-1};
  // every combination of nt_stores, pack_src, widen_src, band_rows, fuse_x_taps, edge_blocks, prefetch_src,
  // group_inner, oc_inner
  std::vector<std::array<int, 9>> switches;
  for (int nt : nts)
    for (int pk : packs)
      for (int wd : widens)
        for (int bd : bands)
          for (int fx : fuses)
            for (int eb : edges)
              for (int pf : prefetches)
                for (int gi : inners)
                  for (int oi : oc_inners) switches.push_back({nt, pk, wd, bd, fx, eb, pf, gi, oi});
  TuningHints h = tile;
  for (int icu : ladder(std::min<int64_t>(8, base.ic_per_group), base.ic_unroll))
    for (int xs : ladder(std::max<int64_t>(1, extent / base.ur_w), base.x_split))
      for (int icb : ic_blocks)
        for (int par : {0, 1})
          for (int ocl : oc_loops)
            for (int c : cpc)
              for (int occ : oc_chunks)
                for (int rc : row_chunks)
                  for (const auto& [nt, pk, wd, bd, fx, eb, pf, gi, oi] : switches) {
                    h.ic_unroll = icu, h.x_split = xs, h.ic_block = icb, h.parallel = par, h.oc_loop = ocl;
                    h.channels_per_call = static_cast<int>(c * cpc_unit), h.oc_chunk = occ, h.row_chunk = rc;
                    h.nt_stores = nt, h.pack_src = pk, h.widen_src = wd, h.band_rows = bd, h.fuse_x_taps = fx;
                    h.edge_blocks = eb, h.prefetch_src = pf, h.group_inner = gi, h.oc_inner = oi;
                    Plan pl;
                    if (try_plan(p, isa, h, pl) && seen.insert(hints_key_text(pl.choices)).second)
                      out.push_back(std::move(pl));
                  }
}

// The candidates of `plans`, the model's fastest first (ties in the order reached).
std::vector<PlanCandidate> ranked(const std::vector<Plan>& plans, const Problem& p, int threads) {
  std::vector<PlanCandidate> out;
  out.reserve(plans.size());
  for (const Plan& pl : plans) out.push_back({pl.name, pl.choices, model_ms(pl, p, threads)});
  std::stable_sort(out.begin(), out.end(),
                   [](const PlanCandidate& a, const PlanCandidate& b) { return a.model_ms < b.model_ms; });
  return out;
}

}  // namespace
}  // namespace detail

std::vector<PlanCandidate> enumerate_plans(const Problem& p, Isa isa, int threads, double max_seconds,
                                           bool* complete) {
  const auto start = std::chrono::steady_clock::now();
  isa = resolve_isa(isa);
  if (threads <= 0) threads = tbb::this_task_arena::max_concurrency();
  std::vector<detail::Plan> plans;
  std::set<std::string> seen;
  std::vector<TuningHints> tiles;
  for (const detail::Plan& s : detail::structures(p, isa))
    for (const TuningHints& t : detail::tiles(p, isa, s)) tiles.push_back(t);
  // Tile after tile in the model's order of the tiles' own plans (with or without a time limit, so that a
  // limit never reached lists the same plans in the same order); past the limit, the remaining tiles' own
  // plans only.
  std::vector<std::pair<double, size_t>> order;
  std::vector<detail::Plan> own(tiles.size());
  for (size_t i = 0; i < tiles.size(); ++i)
    if (detail::try_plan(p, isa, tiles[i], own[i])) order.emplace_back(detail::model_ms(own[i], p, threads), i);
  std::stable_sort(order.begin(), order.end());
  const std::chrono::duration<double> limit(max_seconds);
  bool reached_all = true;
  for (const auto& [ms, i] : order) {
    reached_all = reached_all && (max_seconds <= 0 || std::chrono::steady_clock::now() - start <= limit);
    if (reached_all)
      detail::numeric(p, isa, tiles[i], seen, plans);
    else if (seen.insert(detail::hints_key_text(own[i].choices)).second)
      plans.push_back(std::move(own[i]));
  }
  if (complete) *complete = reached_all;
  return detail::ranked(plans, p, threads);
}

std::vector<PlanCandidate> enumerate_variants(const Problem& p, Isa isa, int threads, const TuningHints& hints) {
  isa = resolve_isa(isa);
  if (threads <= 0) threads = tbb::this_task_arena::max_concurrency();
  std::vector<detail::Plan> plans;
  std::set<std::string> seen;
  detail::numeric(p, isa, detail::tile_of(hints), seen, plans);
  return detail::ranked(plans, p, threads);
}

std::string plan_json(const Problem& p, Isa isa, const TuningHints& hints) {
  return detail::make_plan(p, resolve_isa(isa), hints).to_json();
}

}  // namespace deconvjit
