#include "runtime/plan_rules.hpp"

#include <map>
#include <utility>

namespace deconvjit::detail {

std::string heuristic_rule(const std::string& field, const std::string& algorithm) {
  using Key = std::pair<std::string, std::string>;  // field, family ("" = any)
  static const std::map<Key, std::string> rules = {
      {{"isa", ""},
       "make_plan (plan_isa.cpp): the cap, except on CPUs that run AVX-512 at the AVX2 rate (Zen 4) with sums in "
       "f32 and no hint that counts vectors: AVX2 where both ISAs take the direct, gemm or dot family on f32 or "
       "f16 data and 8-lane vectors hold its channels (output; the dot family's input) 1.3x fuller, "
       "at least 3/4 full (ymm_fills_better)"},
      {{"algorithm", ""},
       "choose_algorithm: one channel per group (G>1) -> depthwise; at most 4 output channels per group and at "
       "least 8 input channels -> dot (with bf16 channel pairs, not for 3+ outputs from at most 12 inputs per "
       "group: direct_pairs_pay; 1-D NXC data with K >= 2s: gemm, folded_row_beats_dot); kernel a multiple "
       "of the stride on x and an NXC-shaped output -> gemm where x pads and output size are multiples of the stride, else where the folded "
       "channels fill lanes 1.3x better over 32+ input channels per group without batch blocking "
       "(gemm_overhang_pays); else direct. col_preferred (sums in f32, not bf16 channel pairs, G=1, at "
       "least half of col's products used): at most 128 input pixels and at least 24 MB of weights (not over "
       "images the row families block over), or (f32) more than 4 output channels that "
       "fill the ISA's vectors half again better as taps x channels (a fifth on NXC data, than gemm's "
       "folded x phases where gemm applies), over at least 256 input channels -> col. NCX: depthwise_x (any "
       "x stride up to the lanes; one that does not divide them leaves lanes idle, x_vector_span) / "
       "gemm_x where they apply (AVX-512; AVX2 by hint; gemm_x_preferred: K == s with the dot "
       "family's shape, rows filling 9/10 of gemm_x's lanes, or 8+ input channels per group where gemm_x "
       "leaves at most 8 more lanes empty per output than the output channels' vectors do, 4 with 2-byte "
       "types: the row buffer's flush costs about that); dot_x "
       "instead of dot for rows of 64+ pixels and kernels of at most 16 taps, x strides dividing the lanes "
       "(dot_x_preferred; on CPUs "
       "with avx512_bf16, bf16 only below 16 products per source element; on AVX2 for 1-3 output channels "
       "only below 24), "
       "depthwise_x also for G=1 with one channel each way (x strides dividing the lanes), NCX or NXC data "
       "(the same bytes), unless gemm's "
       "folded phases fill whole vectors (one_channel_native), and without it the NXC family on the "
       "caller's NCX tensors (layout nxc); col_x on AVX-512 for at "
       "most 16 output channels per group (17-25 where input rows fill 85%+ of their vectors; 12-16 only "
       "where the rows fill 85%+ or more of theirs than the channels do) from 8+ input channels per group "
       "(any number at x stride 1), over rows filling half a vector or more, where gemm_x does not apply "
       "(or runs rows of more than 64 vectors in chunks whose source passes a quarter of L2) "
       "(col_x_preferred; with bf16 channel pairs only for at most 4 output channels or channels filling at "
       "most 3/4 of a vector); col_x on AVX2 (likewise from 8+ input channels "
       "per group above x stride 1) where the output channels (at most 40) leave a tenth of 8-lane "
       "vectors empty, rows fill 85%+ of theirs, with at most 6 x taps, and more than 2 channel blocks only "
       "up to 48 input channels, or exactly 8 channels over rows of 2+ vectors with at most 4 x taps "
       "(col_x_preferred_avx2). The defaults "
       "that change a layer's family on NCX take only hints every family honours (family_neutral)"},
      {{"layout", ""},
       "choose_layout: NXC data needs none; NCX: depthwise_x, dot_x, gemm_x and col_x read and write NCX "
       "themselves (native); otherwise the dot family stores NCX itself (src_copy), depthwise goes "
       "through whole-tensor scratch copies below 8 MB of output (a row buffer from there), gemm through them where folding fills lanes a third again "
       "better (a row buffer of whole pixels instead where a row of every channel holds at most 16K elements "
       "over 4+ MB of output, not blocked over images: gemm_row_buffer_pays), every other row family through "
       "a row buffer (through them too where blocked over images); depthwise through plane tiles "
       "(plane_tiles_preferred: where depthwise_x cannot run or on AVX2 would leave lanes idle, f32 at 9+ "
       "taps per output on rows under 32 pixels, on AVX2 either, 16-bit from 4 taps); one channel each way: "
       "NCX data is NXC data (nxc)"},
      {{"ur_w", ""},
       "choose_tile: the widest block that fits the register file next to its weight vectors and "
       "broadcasts (AVX-512: 6 pixels with 4 vectors, 8 with 2), capped by the row's pixels per phase, and "
       "narrowed (fit_block_to_l1_sets) until no L1 set holds more than 8 of the source lines one reduction "
       "step reads (pixels a multiple of 2 KiB apart); direct and gemm: at most 6 pixels in f32 where the "
       "source streams from memory (16 MiB or more, kernel <= stride on every axis) and the block would span "
       "1 KB or more, not across images (streamed_block_cap: the prefetchers follow a few lines side by side)"},
      {{"ur_w", "gemm_x"},
       "plan_gemm_x: as many input vectors (up to 3) as the row, or the plane, holds; 8 (as many as 24 "
       "accumulators allow, at most 5 output channels x positions) where 32+ input planes of 16 MiB or more "
       "stream from memory, without bf16 pairs (wide_block: longer runs per plane)"},
      {{"ur_w", "depthwise_x"}, "depthwise_x choose_tile: one vector per FMA chain needed to hide latency, "
                                "capped by the row's vectors"},
      {{"ur_w", "dot_x"}, "plan_dot_x: enough vectors for 12 FMA chains (8 on AVX2) with all output channels"},
      {{"ic_unroll", "dot_x"}, "plan_dot_x: accumulator sets (each summing every k-th input channel) up to 12 "
                               "chains, at most 8, within the register file"},
      {{"oc_vectors", "dot_x"}, "plan_dot_x: all output channels (one accumulator set each per vector)"},
      {{"ur_w", "col_x"}, "plan_col_x: input vectors per tile (up to 4; AVX2 2) so that channels x kernel x x "
                          "vectors fill 28 accumulators (AVX2: 12, and 2 vectors before channels: each "
                          "broadcast weight then serves two FMAs)"},
      {{"oc_vectors", "col_x"}, "plan_col_x: output channels per block, as many as 28 accumulators (AVX2: 12) "
                                "hold with one x tap each (AVX2: per input vector), balanced over the blocks"},
      {{"ic_unroll", "col_x"}, "plan_col_x: accumulator sets up to 12 FMA chains within 28 accumulators (AVX2: 12)"},
      {{"batch_block", "col_x"}, "plan_col_x: off (tiles across images measured 0.8-1.09x on one-vector rows)"},
      {{"x_split", "col_x"}, "plan_col_x: parts of at least 32 tiles when rows (of every image and group) give "
                             "fewer than 32 tasks (at most 8)"},
      {{"ur_w", "dot"},
       "choose_dot_tile: the most pixels whose C_OUT accumulators fit (16 on AVX-512, 12 on AVX2); one pixel "
       "where the source streams from memory (16 MiB or more; 16-bit on AVX2 32), kernel 1 on every axis and a "
       "block that would span 1 KB or more, not across images (streamed_block_cap: in address order)"},
      {{"oc_vectors", ""},
       "choose_tile: 4 vectors on AVX-512 (3 when the channels divide by 3 and not 4), 2 on AVX2 (3 for "
       "gemm's long channel runs, but 4 (of 4+) in f32 gemm where each output sums at most 64 products: whole "
       "lines; 3 otherwise for an odd multiple of 3 vectors; 4 for f16 in the direct family where each "
       "broadcast is converted (the source not widened) and the channels fill whole blocks of 4: "
       "f16_avx2_wide_block; 4 with one weight vector read by the FMAs in 3 pixels: hybrid_tile_pays), never "
       "more than the channels need"},
      {{"weight_regs", ""},
       "choose_tile: AVX2 direct and gemm keep every weight vector of a block in registers, except the 3 x 4 "
       "tile (hybrid_tile_pays: f32, bf16 or f16 with a widened source, channel vectors a multiple of 4, no "
       "blocks across images, a block's weights per phase 16-512 KB), whose FMAs read the fourth from memory"},
      {{"oc_vectors", "gemm_x"}, "plan_gemm_x: as many output channels as fit 24 accumulators"},
      {{"oc_vectors", "depthwise_x"}, "depthwise_x choose_tile: several channels per block unless their planes "
                                      "alias in L1 (a multiple of 4 KiB apart)"},
      {{"oc_vectors", "dot"}, "choose_dot_tile: all output channels (one accumulator each per pixel)"},
      {{"band_rows", ""},
       "choose_band_rows: NCX row buffers and widened NXC sources (direct, gemm) take bands of about 256 KB "
       "of input rows (halved toward 16 tasks) where such a band holds 8 times the input rows it shares with "
       "the next and there are 8+ bands; the dot family's NCX source copy (or widened NXC source) wherever an "
       "image's source exceeds one band and there are 8+ bands; in 3-D (bands of one output plane, at most one "
       "z tap each) only where an image's source passes 1 MiB and rows are whole 8x8 tiles or 24+ pixels; "
       "otherwise the whole source is transposed (widened) first"},
      {{"widen_src", ""},
       "choose_widen_src: f16 outside depthwise and dot widens the source to f32 once (a copy, or per band where the "
       "plan bands its rows) on AVX2 where each source element feeds 128+ FLOPs, on AVX-512 with at most 3 "
       "input channels per group; otherwise the kernel widens what it reads"},
      {{"fuse_x_taps", ""},
       "choose_fused_x_taps: the depthwise family does a phase's 2+ x taps in one pass over the source pixels "
       "where registers allow, except where some x phase has a single tap and the output reaches 16 MB; the "
       "dot family for 1-2 output channels where every x phase has 2+ taps (or, with phases of one tap, where "
       "the block keeps its width and reads 4 KB+ of source per tap) and the block, narrowed for the "
       "taps' weights, keeps 8 accumulators, not f16 on AVX2 (dot_fusion_pays)"},
      {{"edge_blocks", ""},
       "choose_edge_blocks: wherever the direct or gemm family runs with the x halo and blocks along x (no "
       "batch_block), the blocks at a row's borders run functions of their own that skip the FMAs on the "
       "halo's zeros"},
      {{"ic_unroll", ""}, "choose_tile: 4 input channels per unrolled step (fewer when there are fewer); 8 for f16 on "
                          "AVX-512 with two output vectors per pixel, whose widening then costs half as much"},
      {{"ic_unroll", "gemm_x"}, "plan_gemm_x: 2 input channels per step"},
      {{"x_split", ""},
       "choose_threading: rows first; when rows x channel blocks give fewer than 256 tasks, rows are cut "
       "into parts of at least two blocks each"},
      {{"ic_block", ""}, "choose_ic_blocks: one pass over the input channels (splitting measured slower)"},
      {{"x_halo", ""},
       "choose_halo: zero columns around the source when the arithmetic per source element is at least "
       "2048 FLOP, the halo is small next to the row and merges some border run of 1-3 pixels (none with a "
       "dilation of 4+), or at least 768 FLOP and the halo merges border "
       "runs of 1-3 pixels holding 8%+ of the row's FMAs, adding no more FMAs on zeros than on data (not in gemm, "
       "nor across images)"},
      {{"ic_pairs", ""},
       "choose_ic_pairs: bf16 data in the direct, gemm, dot, col_x and gemm_x families on a CPU with avx512_bf16 reduces "
       "input channels in pairs (vdpbf16ps, twice the f32 FMA rate; subnormal inputs count as zero)"},
      {{"nt_stores", ""},
       "choose_nt_stores: non-temporal stores (where a block starts on a cache line) where source and output "
       "together reach 24 MB (NXC; on AVX-512 at 4+ FLOPs per output byte 8 MB, 16 MB in 16-bit data) or the "
       "output 64 MB (NCX planes of depthwise_x and dot_x; 8 MB at 3+ FLOPs per output byte) with at most 96 "
       "FLOPs per output byte (48 at AVX2's half rate, 192 with bf16 pairs), in the "
       "direct, depthwise, depthwise_x and dot_x families, and in gemm for f32 on AVX-512 where a folded pixel "
       "holds 512+ bytes of output (gemm_nt_pays; narrower ones measured slower); "
       "NCX through the row buffer: by its flush from 4 MB of output at any arithmetic"},
      {{"prefetch_src", ""},
       "prefetch_src_pays: the direct, gemm and dot families on NXC data ask for the next block's source where "
       "the source reaches 8 MiB and the next block's source is at most 12 KB (blocks along x only; not dot on "
       "16-bit data)"},
      {{"prefetch_src", "col_x"}, "col_x_prefetch_pays: where a row spans several tiles"},
      {{"group_inner", ""},
       "group_inner_pays: the row tasks of a grouped layer take the group innermost with at most 64 KB of "
       "packed weights, from 2 MiB of source (1-D, NXC data) or from 2 MiB of NXC-shaped output (not the row "
       "buffer) whose groups share cache lines (a group's channels of a pixel not a whole number of lines, in one "
       "channel-block call), unless oc_inner is asked for"},
      {{"oc_inner", ""}, "oc_inner_pays: the direct and gemm families' tasks take the channel block innermost "
                          "where a block's channels start or end inside a cache line of an NXC-shaped output "
                          "(not the row buffer)"},
      {{"batch_block", ""}, "choose_batch_blocking: at least 4 images and rows shorter than two blocks (never gemm "
                           "whose folded pixels overhang the row, nor dot rows that fuse their x taps: dot_row_fuses)"},
      {{"parallel", ""}, "choose_parallel: oneTBB from 2 MFLOP or 16K elements of operands; smaller problems run on the calling "
                        "thread"},
      {{"oc_loop", ""}, "choose_oc_loop: a depthwise call walks all channel blocks (without a tail or row buffer; "
                        "plane tiles: all of the tile's)"},
      {{"channels_per_call", ""}, "choose_plane_tile: the most whole blocks dividing the channels whose planes "
                                  "fit 256 KiB, keeping 16 tasks"},
      {{"channels_per_call", "depthwise_x"}, "plan_depthwise_x: channel chunks so that rows x chunks give about "
                                             "256 tasks; over outputs of 12 MB+ where that leaves 8+ channels "
                                             "per call, the fewest whole register blocks that write 512 "
                                             "elements (streaming_channels)"},
      {{"rows_per_block", "gemm_x"}, "plan_gemm_x: rows of one vector are stacked up to 3 per block"},
      {{"flat_plane", "gemm_x"}, "plan_gemm_x: narrow rows (one vector, not a multiple of it) of planes up to "
                                 "48 vectors run as one sequence across rows"},
      {{"pack_src", "gemm_x"},
       "choose_pack_src: a task copies its row group's source into a contiguous tile when input planes are a "
       "multiple of 8 KiB apart (they collide in the L2's sets), from 17 input channels and with at least two of "
       "the task's channel blocks (oc_chunk) to read it; with bf16 pairs from 8 of them (their half-vector loads "
       "then never split a cache line); never with x chunks (a task would copy whole rows)"},
      {{"oc_chunk", "gemm_x"}, "choose_tiles: channel blocks whose weights fill half of a 1 MiB L2, halved in "
                                "turn with row_chunk until the tiles make 16 tasks (split_tiles_for_tasks)"},
      {{"row_chunk", "gemm_x"}, "choose_tiles: row groups whose source fills a quarter of a 1 MiB L2, halved in "
                                 "turn with oc_chunk until the tiles make 16 tasks (split_tiles_for_tasks)"},
  };
  if (auto it = rules.find({field, algorithm}); it != rules.end()) return it->second;
  if (auto it = rules.find({field, ""}); it != rules.end()) return it->second;
  return "";
}

}  // namespace deconvjit::detail
