// Planning of the output's stores: whether whole lines leave by non-temporal stores (Plan::nt_stores),
// from the kernel where it writes dst itself, or from the row buffer's flush.
#include "runtime/plan.hpp"

namespace deconvjit::detail {

// Every store block must write whole cache lines. A zmm store is one; a ymm store is half of one, and where
// blocks start or end mid-line the write-combining buffer sends part-written lines to memory as slow
// partial writes (AVX2, depthwise_x on 68-pixel rows, dla34_fairmot_dw256_f2: 0.081 -> 0.150 ms with them;
// deeplabv3p_aspp_up4_dw 1.22x slower), while on whole lines they gained as much as on AVX-512
// (mobilenetv2_bwd_dw96_b16 NXC 2.3 -> 1.15 ms). So AVX2 takes them in the NXC families only, where every
// block holds an even number of whole vectors per pixel and pixels are whole lines apart; depthwise_x's
// blocks along a row end wherever the row does. NCX rows are whole vectors too, so that every row is
// aligned or none is: mixing plain and non-temporal stores over the same lines lost.
bool nt_stores_possible(const Plan& pl) {
  const bool zmm = pl.isa == Isa::avx512_core, f32 = pl.dtype == DType::f32;
  // The row buffer's flush: a line's run of a channel's row (16 f32, 32 16-bit elements:
  // transpose_block_avx512, or on AVX2 transpose_block_nt), each a whole line where the row starts one.
  if (row_buffered(pl.layout)) return flush_in_lines(pl) && pl.ic_blocks == 1;
  // depthwise_x and dot_x: vectors along NCX rows, channels a plane apart.
  if (x_vector_family(pl.algorithm))
    return zmm && f32 && pl.layout == LayoutPath::ncx_native && pl.dst_c % pl.lanes == 0 &&
           pl.axes[2].out % pl.lanes == 0 && x_vector_span(pl) == pl.lanes;
  const bool family = pl.algorithm == Algorithm::direct || pl.algorithm == Algorithm::gemm ||
                      pl.algorithm == Algorithm::depthwise;
  // A vector is a line for f32 zmm, half of one for f32 ymm and 16-bit zmm (16-bit ymm stores are not
  // emitted non-temporally): then pixels must be whole lines apart and every block hold an even number of
  // whole vectors.
  const int64_t vbytes = pl.lanes * pl.elem_bytes();
  const bool whole_lines = vbytes == 64 || (pl.dst_x * pl.elem_bytes() % 64 == 0 && pl.main.vectors % 2 == 0 &&
                                            pl.last.vectors % 2 == 0 && pl.last.mask_lanes == 0);
  // gemm's overhanging rows (Plan::fold_shift, fold_tail): rows and their first folded pixel a whole number
  // of lines apart, else every block would miss the alignment and store as usual under an _nt name.
  const bool lines = !pl.overhangs_row() || ((pl.dst_row_elements() * pl.elem_bytes()) % 64 == 0 &&
                                             (pl.dst_row_offset() * pl.elem_bytes()) % 64 == 0);
  return family && (f32 || zmm) && whole_lines && lines && pl.layout == LayoutPath::nxc && pl.ic_blocks == 1 &&
         pl.dst_c == 1 && pl.dst_x % pl.lanes == 0;
}

// Measured with nt_stores 1 against 0 on every suite layer with the choice (2 threads; docs/PERFORMANCE.md,
// data in docs/data/nt_stores_sweep_*_2t.jsonl; see nt_store_min_bytes for the sizes):
// - depthwise, 1-3 FLOPs per byte: NXC from 27 MB up 1.44-2.08x (dla34_centernet_dw64_f2_b16 2.08x,
//   mobilenetv2_bwd_dw96_b16 1.83x), at 17 MB 1.05x, at 4-10 MB 0.79-0.82x; NCX (depthwise_x): see
//   nt_store_min_bytes;
// - direct at 64-72 FLOPs per byte from 32 MB: 1.06-1.10x (resnet50_bwd_l2down_b16 1.09x, whose stride
//   leaves 3/4 of the output zeros; linknet34_finaldeconv 1.10x); 0.98-1.03x at 16 MB; at 108 FLOPs per
//   byte and more, 0.96-1.01x;
// - gemm lost on all its large outputs there (0.77-1.01x, swinunetr_dec1 0.77x at 24 FLOPs per byte, 96
//   folded channels), so it keeps plain stores except where its pixels are wide (gemm_nt_pays);
// - the row buffer's flush (NCX, AVX-512) from 4 MB: f32 1.00-1.18x on all 33 such suite layers, at any
//   arithmetic (unet3d_up3 1.18x at 64 FLOPs per byte, johnson_up2_b4 1.16x, pix2pixhd_g1_up1 1.00x at
//   1152); at 2-3.5 MB 0.89-1.09x (dilated_syn 0.89x), below 0.91-1.06x. bf16 from 4 MB 0.996-1.10x on
//   all 22, below 0.93-1.13x (docs/data/nt_flush_sweep_{f32,bf16}_2t.jsonl, tools/scripts/nt_flush_sweep.py);
//   f16 moves the same bits as bf16 and takes the same bound.
// The FLOPs per byte are those of AVX-512's f32 rate; at AVX2's half rate the arithmetic takes twice as
// long next to the same stores, so the bound halves (AVX2: depthwise 1.3-2.1x faster, direct at 64-72 FLOPs
// per byte 4-7% slower), and bf16 channel pairs (twice the rate) double it.
constexpr double kNtStoreFlopsPerByte = 96;

// gemm (f32, AVX-512) from outputs of 512 bytes or more per pixel (128+ folded channels). Zen 4, 2 threads,
// 76 layers drawn for it (1x1 and K == s, 2-D and 3-D, 8-64 input channels, 16-80 MB of output;
// docs/data/gemm_nt_sweep_zen4_2t.jsonl): at 40-80 MB all 30 such gain, 1.10-2.03x (8 input channels
// into 128: 1.24-1.68x); narrower pixels lose or tie at any size (0.57-1.20; 16-32 channels from 8 inputs
// 0.58-0.94), as at 16 MB do 8 input channels (0.65-0.69). Suite and holdout layers: seed 71's ho01
// (8 -> 512, 51 MB) 1.53-1.92x, pointpillars_up1_k1 (27 MB) 1.17x, the 11 it moves 1.03-1.54x
// (docs/data/gemm_nt_changed_ab_zen4_2t.txt); seed 37's ho19 (19 MB, 1.20x) sits below the output bound;
// seed 37's ho05 (32 folded channels, 0.69x) is too narrow. Pixels are the folded ones (C_OUT x stride).
bool gemm_nt_pays(const Plan& pl) {
  return pl.algorithm == Algorithm::gemm && pl.isa == Isa::avx512_core && pl.dtype == DType::f32 &&
         pl.oc_per_group * pl.elem_bytes() >= 512;
}

namespace {

// The output from which non-temporal stores pay (where there are few FLOPs per output byte). A plain store
// first reads its line into the caches (the write-allocate), so an output the caches cannot keep crosses
// the memory bus twice; a non-temporal one writes it once. NXC data is one write stream, which the caches
// handle well until it and the source outgrow them (24 MB, nt_store_bytes). From the row buffer's flush
// (NCX rows of many channel planes), 4 MB as measured (choose_nt_stores); on AVX2 (tiles of a line's rows
// by 8 channels) too: Zen 4, 2 threads, nt against plain, f32 on the 71 suite layers of 2+ MB through the row
// buffer 1.01x below 8 MB (0.97-1.07), 1.03x at 8-16, 1.04x at 16-64 (0.99-1.21: unetr_dec2, 56 MB), 1.06x
// above; bf16 and f16 on 60 layers of 1+ MB 1.027x and 1.029x (0.99-1.11) (docs/data/nt_flush_avx2_*).
// NCX rows of depthwise_x and dot_x (few FLOPs per byte, each call writing whole output rows in address
// order) from 64 MB (and from 8 MB where the arithmetic is denser: nt_store_big). Zen 4, 2 threads, f32,
// every suite and holdout row of these families from 2 MB, both ways (docs/data/nt_x_family_zen4_2t.txt):
// below the 32 MB L3 non-temporal stores ran 0.65x geomean over 18 rows, 12 of them 0.27-0.82x (a 1-D
// depthwise row of 10 MB, holdout s113 ho04, 0.098 ms plain against 0.365 written to memory;
// dla_up_dw64_f4 0.62x), 3 at 1.29-1.43x (a 5x5 row at stride 2 and two 1-D kernel-7 rows at stride 1); at
// 39-59 MB 0.91x over 12 (0.61-1.47), from 64 MB 1.12x over 16 (0.89-1.84). Plain stores of whole lines
// in address order ran near the memory's write rate where the output outgrew the L3 (s197 ho29, 39 MB in
// 0.89 ms), and an output the L3 keeps is there for the next layer too. The 23 rows these bounds move,
// three passes minutes apart: 1.58x geomean of each row's median (0.82-3.72; s113 ho42, 58 MB of a 1-D
// kernel-4 row, 0.73-0.96x); the L3's share is the host's to give, and in the third pass the dla_* rows
// ran 0.62-0.93x (their plain stores 1.5x slower than minutes before: another guest's lines, likely).
// (Session 3 measured a 2 MB bound on Zen 5 with the kernels of then: 1.60x at 4 MB.)
int64_t nt_store_min_bytes(const Plan& pl) {
  if (row_buffered(pl.layout)) return int64_t{4} << 20;
  return x_vector_family(pl.algorithm) ? int64_t{64} << 20 : int64_t{24} << 20;
}
// The bytes nt_store_min_bytes is compared with. NXC rows: the output and the source (as much of it as
// the output's size), which compete for the same caches while the kernel runs: where both outgrow them,
// every output line's write-allocate read comes from memory, even for an output below the bound (holdout
// s97 ho06, depthwise 7x7 over 384 channels of 99x99, 15 + 15 MB: 1.24x faster with non-temporal stores;
// ho47, 13 + 13 MB, 1.29x; docs/data/nt_src_dst_ab_zen4_*.jsonl). Every row measured had a source no
// bigger than its output; a small output beside a big source is not counted past its own size. NCX: the
// output.
double nt_store_bytes(const Plan& pl, const Problem& p) {
  const double dst = static_cast<double>(p.dst_elements() * pl.elem_bytes());
  if (row_buffered(pl.layout) || x_vector_family(pl.algorithm)) return dst;
  return dst + std::min(dst, static_cast<double>(p.src_elements() * pl.src_elem_bytes()));
}

}  // namespace

// NXC rows on AVX-512 also from 8 MB (nt_store_bytes) where each output byte carries 4+ FLOPs. Zen 4, 2
// threads, the 22 suite and holdout rows a 16 MB bound moved (docs/data/nt_16mb_ab_zen4_2t.jsonl): the 13 of
// them at 6-72 FLOPs per byte on AVX-512 1.01-2.67x (s71 ho11 2.67x, s37 ho19 1.37x, s11 ho07 1.28x); at 2
// or fewer, memory-bound layers that the caches keep between runs lost (s37 ho23 0.62x, s97 ho05 0.74x,
// deeplabv3p_aspp_up4_dw 0.97x; two 16-bit ones gained 1.07-1.15x); AVX2 0.92-1.05x. From 8 MB (session
// 25, every NXC direct and dot row both ways, two runs, docs/data/nt_rows_8mb_zen4_2t.txt): the 26 rows of
// 8-16 MB of output without them 1.05x and 1.06x (0.97-1.30; holdout s53 ho37 1.17-1.30x), 4-8 MB 1.03x
// and 1.06x (0.93-1.63, noisy), below 4 MB 1.01x; the 36 f32 rows the 8 MB bound moves, against the old
// default, 1.05x (1.00-1.25). Not in 16-bit (the same FLOPs per half the bytes): bf16 0.97x over the 13
// rows it would move, f16 0.98x over 10 (depthwise 8x8 at stride 4: bf16 0.74-0.79x, f16 0.86-0.87x), so
// 16 MB there.
// NCX rows of depthwise_x and dot_x where each output byte carries 3+ FLOPs (1-D kernel-7 rows at stride
// 1, 3.5: holdout s229 ho16, s227 ho38 and s223 ho32, 20-59 MB, 1.07-1.59x non-temporal; the same at 7 MB
// 0.77-0.99x; a 5x5 row at stride 2 of 10 MB, s11 ho47, 1.14-1.43x; a 3x3 row at stride 1 of 39 MB, s151
// ho17, 0.97-1.09x).
constexpr int64_t kNtStoreArithmeticMinBytes = int64_t{8} << 20, kNtStoreArithmeticMinBytes16 = int64_t{16} << 20;
constexpr double kNtStoreMinFlopsPerByte = 4, kNtStoreXMinFlopsPerByte = 3;

bool nt_store_big(const Plan& pl, const Problem& p) {
  const double bytes = nt_store_bytes(pl, p);
  if (bytes >= static_cast<double>(nt_store_min_bytes(pl))) return true;
  const double dst = static_cast<double>(p.dst_elements() * pl.elem_bytes());
  const double dense = x_vector_family(pl.algorithm) ? kNtStoreXMinFlopsPerByte : kNtStoreMinFlopsPerByte;
  return !row_buffered(pl.layout) && pl.isa == Isa::avx512_core &&
         bytes >= static_cast<double>(pl.dtype == DType::f32 ? kNtStoreArithmeticMinBytes
                                                              : kNtStoreArithmeticMinBytes16) &&
         p.flops() >= dense * dst;
}

void choose_nt_stores(Plan& pl, const Problem& p, const TuningHints& h) {
  const bool possible = nt_stores_possible(pl);
  check_hint(h.nt_stores != 1 || possible,
             "nt_stores needs data written straight into dst in whole cache lines: NXC by the direct, gemm or "
             "depthwise family in one reduction pass with output pixels a whole number of vectors apart (where a "
             "vector is half a line, f32 on AVX2 or 16-bit data on AVX-512: pixels whole lines apart and an even "
             "number of vectors per block), or f32 NCX on AVX-512 by depthwise_x or dot_x with output rows a whole "
             "number of vectors long and an x stride dividing the lanes, or NCX by the row buffer's flush in one "
             "reduction pass with output rows a whole number of cache lines long");
  const double dst_bytes = static_cast<double>(p.dst_elements() * pl.elem_bytes());
  const bool big = nt_store_big(pl, p);
  const bool wanted = row_buffered(pl.layout)
                          ? big
                          : (pl.algorithm != Algorithm::gemm || gemm_nt_pays(pl)) && big &&
                                p.flops() <= kNtStoreFlopsPerByte * pl.lanes / 16 * (pl.ic_pairs ? 2 : 1) * dst_bytes;
  pl.nt_stores = possible && (h.nt_stores >= 0 ? h.nt_stores == 1 : wanted);
}

}  // namespace deconvjit::detail
