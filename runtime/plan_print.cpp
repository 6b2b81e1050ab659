// A plan's identity and printed forms: its choices as hints, its JSON, and the signature of its packed
// weights. (Split from plan.cpp, which makes the decisions.)
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/int_math.hpp"
#include "runtime/plan.hpp"

namespace deconvjit::detail {

const char* to_string(Algorithm a) {
  switch (a) {
    case Algorithm::direct: return "direct";
    case Algorithm::gemm: return "gemm";
    case Algorithm::depthwise: return "depthwise";
    case Algorithm::dot: return "dot";
    case Algorithm::depthwise_x: return "depthwise_x";
    case Algorithm::dot_x: return "dot_x";
    case Algorithm::gemm_x: return "gemm_x";
    case Algorithm::col: return "col";
    case Algorithm::col_x: return "col_x";
  }
  return "?";
}

const char* to_string(LayoutPath l) {
  switch (l) {
    case LayoutPath::nxc: return "nxc";
    case LayoutPath::ncx_row_buffer: return "ncx_row_buffer";
    case LayoutPath::ncx_in_kernel: return "ncx_in_kernel";
    case LayoutPath::ncx_via_scratch: return "ncx_via_scratch";
    case LayoutPath::ncx_src_copy: return "ncx_src_copy";
    case LayoutPath::ncx_src_in_place: return "ncx_src_in_place";
    case LayoutPath::ncx_native: return "ncx_native";
    case LayoutPath::ncx_plane_tiles: return "ncx_plane_tiles";
  }
  return "?";
}

namespace {

// The layout hint that selects each path ("" where the data format or the family decides it).
const char* layout_hint(LayoutPath l) {
  switch (l) {
    case LayoutPath::ncx_row_buffer: return "row_buffer";
    case LayoutPath::ncx_in_kernel: return "in_kernel";
    case LayoutPath::ncx_via_scratch: return "scratch";
    case LayoutPath::ncx_src_copy: return "src_copy";
    case LayoutPath::ncx_src_in_place: return "src_in_place";
    case LayoutPath::ncx_plane_tiles: return "plane_tiles";
    case LayoutPath::nxc:
    case LayoutPath::ncx_native: return "";
  }
  return "";
}

// Every choice the plan made, as hints that make it again: the tuner's coordinates of this plan. (Each
// family accepts the neutral value of a choice it does not make: one pass, x_split 1, no halo, ...)
}  // namespace

TuningHints plan_choices(const Plan& pl) {
  TuningHints c;
  c.algorithm = to_string(pl.algorithm);
  c.isa = to_string(pl.isa);
  if (pl.algorithm == Algorithm::col) return c;  // its inner kernel is planned by the heuristic
  // NCX data planned as NXC (one channel each way): the hint that asks for it.
  c.layout = pl.layout == LayoutPath::nxc && pl.user_layout == DataFormat::NCX ? "nxc" : layout_hint(pl.layout);
  c.ur_w = pl.ur_w;
  c.oc_vectors = pl.oc_vectors;
  c.ic_unroll = pl.ic_unroll;
  c.x_split = pl.x_split;
  c.ic_block = static_cast<int>(pl.ic_block);
  c.x_halo = pl.has_halo() ? 1 : 0;
  c.batch_block = pl.block_over_batch ? 1 : 0;
  c.parallel = pl.parallel ? 1 : 0;
  c.oc_loop = pl.oc_loop;
  if (pl.dtype == DType::bf16) c.ic_pairs = pl.ic_pairs ? 1 : 0;  // a choice only bf16 data has
  if (nt_stores_possible(pl)) c.nt_stores = pl.nt_stores ? 1 : 0;  // likewise: where the stores can be
  if (widen_src_possible(pl)) c.widen_src = pl.widen_src ? 1 : 0;  // likewise: 16-bit row families
  if (band_possible(pl)) c.band_rows = static_cast<int>(pl.band_rows);  // likewise: where bands are
  if (fuse_x_possible(pl)) c.fuse_x_taps = pl.fused_x_taps ? 1 : 0;     // likewise: depthwise and dot rows
  if (edge_blocks_possible(pl)) c.edge_blocks = pl.edges.empty() ? 0 : 1;  // likewise: rows with the halo
  if (weight_regs_possible(pl)) c.weight_regs = pl.weight_regs;           // likewise: AVX2 row tiles
  if (prefetch_src_possible(pl)) c.prefetch_src = pl.prefetch_src ? 1 : 0;  // likewise: NXC rows, col_x
  if (group_inner_possible(pl)) c.group_inner = pl.group_inner ? 1 : 0;     // grouped row families
  if (oc_inner_possible(pl)) c.oc_inner = pl.oc_inner ? 1 : 0;              // rows of several channel blocks
  if (pl.algorithm == Algorithm::depthwise_x || pl.layout == LayoutPath::ncx_plane_tiles)
    c.channels_per_call = static_cast<int>(pl.channels_per_call);
  if (pl.algorithm == Algorithm::gemm_x) {
    c.rows_per_block = pl.rows_per_block;
    c.flat_plane = pl.flat_plane ? 1 : 0;
    c.oc_chunk = static_cast<int>(pl.oc_chunk);
    c.row_chunk = static_cast<int>(pl.row_chunk);
    c.pack_src = pl.pack_src ? 1 : 0;
  }
  return c;
}


std::string Plan::packing_signature() const {
  std::string sig = std::string(to_string(algorithm)) + '/' + std::to_string(lanes) + '/' +
                    std::to_string(groups) + '/' + std::to_string(ic_per_group) + '/' +
                    std::to_string(oc_per_group) + '/' + std::to_string(main.vectors) + '/' +
                    std::to_string(last.vectors) + '/' + std::to_string(ic_vectors);
  for (const Axis& a : axes) sig += '/' + std::to_string(a.kernel);
  // depthwise_x lanes hold x phases: which kernel x a lane sees depends on the stride and pad phase.
  if (x_vector_family(algorithm))
    sig += "/x" + std::to_string(axes[2].stride) + ':' + std::to_string(floor_mod(axes[2].pad_begin, axes[2].stride));
  if (ic_pairs) sig += "/bf16pairs";  // 32-bit slots hold two bf16 weights, not one f32
  if (bf16_even_odd) sig += "/evenodd";  // channels of each 32-group: even ones, then odd ones
  return sig + "/s" + std::to_string(fold_stride);
}

std::string Plan::to_json() const {
  nlohmann::ordered_json j;
  j["name"] = name;
  j["isa"] = deconvjit::to_string(isa);
  j["dtype"] = deconvjit::to_string(dtype);  // src and dst; packed weights are f32
  j["choices"] = nlohmann::ordered_json::parse(deconvjit::to_json(choices));
  j["algorithm"] = to_string(algorithm);
  j["layout"] = to_string(layout);
  j["block_over_batch"] = block_over_batch;
  j["row_buffer_floats"] = row_buffer_floats;
  j["halo"] = {halo_left, halo_right};
  if (!edges.empty()) {
    nlohmann::ordered_json e = nlohmann::ordered_json::array();
    for (const EdgeBlock& b : edges) e.push_back({{"width", b.width}, {"first", b.first}, {"taps", b.taps}});
    j["edges"] = e;
  }
  j["ur_w"] = ur_w;
  j["oc_vectors"] = oc_vectors;
  if (weight_regs_possible(*this)) j["weight_regs"] = weight_regs;
  j["nt_stores"] = nt_stores;
  j["prefetch_src"] = prefetch_src;
  j["group_inner"] = group_inner;
  j["oc_inner"] = oc_inner;
  j["pack_src"] = pack_src;
  j["widen_src"] = widen_src;
  if (dtype == DType::bf16) j["bf16_vcvt"] = bf16_vcvt;
  if (algorithm == Algorithm::depthwise || algorithm == Algorithm::dot) j["fused_x_taps"] = fused_x_taps;
  j["band_rows"] = band_rows;
  j["ic_unroll"] = ic_unroll;
  j["acc_chains"] = acc_chains;
  j["x_split"] = x_split;
  j["oc_loop"] = oc_loop;
  j["parallel"] = parallel;
  j["oc_blocks"] = oc_blocks;
  j["last_block"] = {{"vectors", last.vectors}, {"mask_lanes", last.mask_lanes}};
  j["reduction"] = ic_per_group;
  j["ic_block"] = ic_block;
  j["ic_blocks"] = ic_blocks;
  j["ic_vectors"] = ic_vectors;
  j["ic_tail_lanes"] = ic_tail_lanes;
  if (algorithm == Algorithm::depthwise_x || layout == LayoutPath::ncx_plane_tiles)
    j["channels_per_call"] = channels_per_call;
  if (algorithm == Algorithm::gemm) j["fold"] = {{"stride", fold_stride}, {"shift", fold_shift}, {"tail", fold_tail}};
  if (algorithm == Algorithm::gemm_x) {
    j["rows_per_block"] = rows_per_block;
    j["flat_plane"] = flat_plane;
    j["x_chunk"] = x_chunk;
    j["oc_chunk"] = oc_chunk;
    j["row_chunk"] = row_chunk;
  }
  for (int i = 0; i < 3; ++i) {
    const Axis& a = axes[i];
    j["axes"].push_back({{"in", a.in}, {"kernel", a.kernel}, {"stride", a.stride},
                         {"dilation", a.dilation}, {"pad_begin", a.pad_begin}, {"out", a.out}});
  }
  return j.dump();
}

}  // namespace deconvjit::detail
