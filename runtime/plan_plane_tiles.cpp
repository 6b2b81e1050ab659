// Planning for the plane-tile route (LayoutPath::ncx_plane_tiles): depthwise layers on NCX data whose
// channel planes are small. A task transposes a tile of whole source planes (Plan::channels_per_call of
// them) into an NXC tile, runs the NXC depthwise kernel over it into an NXC output tile, and transposes
// that into the caller's planes. Both tiles stay in cache, the kernel keeps channels in its vectors, and
// each output plane leaves as one contiguous run, where depthwise_x (vectors along x) pays masks and
// permutes per short row and writes a few pixels of each of many planes per call.
#include <string>

#include "runtime/cpu.hpp"
#include "runtime/plan.hpp"

namespace deconvjit::detail {
namespace {

// The largest tile (input and output planes of its channels) the default sizes for: a quarter of a 1 MiB
// L2, so the two tiles and the weights stay there between the copies and the kernel.
constexpr int64_t kTileBytes = 256 << 10;
// Tasks the default keeps at least (tiles are cut smaller for them), so that two threads balance.
constexpr int64_t kMinTasks = 16;

// One channel's input and output planes.
int64_t channel_bytes(const Problem& p) {
  const int64_t planes = p.src_elements() / (p.batch * p.c_in) + p.dst_elements() / (p.batch * p.c_out);
  return planes * static_cast<int64_t>(dtype_size(p.dtype));
}

}  // namespace

const char* const kPlaneTilesNeeds =
    "layout plane_tiles needs the depthwise family (G > 1, one channel per group) on NCX data, channels a "
    "multiple of the vector lanes, and the planes of one vector of channels within 256 KiB";

bool plane_tiles_applies(const Problem& p, Isa isa) {
  const int64_t lanes = vector_lanes(isa);
  return p.data_format == DataFormat::NCX && p.groups > 1 && p.c_in_per_group() == 1 &&
         p.c_out_per_group() == 1 && p.c_out % lanes == 0 && lanes * channel_bytes(p) <= kTileBytes;
}

// The tiles cost two transposes per element in cache; depthwise_x pays a permute per tap and vector, and
// masks and partial vectors at the ends of each row (on AVX2 without opmasks). So the tiles take: layers
// depthwise_x cannot take (it would be whole-tensor copies or row buffers); f32 layers of 9+ taps per output
// on short rows (under 32 pixels), and on AVX2 either; 16-bit layers (whose depthwise_x also widens and
// rounds per vector) of 4+ taps. Zen 4, NCX, 2 threads, every suite and holdout layer the route applies to,
// against depthwise_x, min of two sweeps of 3 interleaved runs (docs/data/plane_tiles_vs_depthwise_x_*): taken,
// f32 AVX2 1.22-2.36 over 11 (geomean 1.61; efficientnetb0_bwd_dw672_b16 2.36x, mobilenetv2_bwd_dw576_b16
// 1.92x), AVX-512 1.08-2.53 over 6 (1.48); bf16 and f16 1.39-1.79 over 14-17 each, below 1.0 only rows of
// 64-112 pixels at 4 taps (dla34_centernet_dw128_f2 0.78-0.88, AVX2 bf16 1.06; ho19 0.87-0.94). Left: f32 at
// 1-4 taps on rows of 32+ pixels 0.52-0.99 (AVX2: ho36 1.29 missed), AVX-512 f32 0.58-0.90 but
// efficientnetb0_bwd_dw144_b16 (56-pixel rows) 1.14, 16-bit at 1-2 taps 0.56-1.03. Where depthwise_x cannot
// run, against the whole-tensor copies or row buffer (docs/data/plane_tiles_vs_default_*): 1.16-2.16 (ho31,
// stride 3 on AVX-512, which depthwise_x now takes with 15 of 16 lanes: 6 against 7 us, three runs of one
// process; 1-D stride 16 on AVX2). Taps per output: the product of ceil(kernel / stride). On AVX2 also
// where depthwise_x would leave lanes idle (an x stride not dividing 8; see x_vectors_whole).
bool plane_tiles_preferred(const Problem& p, Isa isa) {
  if (!plane_tiles_applies(p, isa)) return false;
  if (!depthwise_x_applies(p, isa) || (isa == Isa::avx2 && !x_vectors_whole(p, isa))) return true;
  int64_t taps = 1;
  for (size_t i = 0; i < p.kernel.size(); ++i) taps *= (p.kernel[i] + p.stride[i] - 1) / p.stride[i];
  const bool short_rows = p.out.back() < 32;
  if (p.dtype != DType::f32) return taps >= 4;
  return isa == Isa::avx2 ? taps >= 9 || short_rows : taps >= 9 && short_rows;
}

// Whole register blocks per tile: the block's channel vectors divide the layer's (no tail block) and its
// planes fit kTileBytes, then the tile takes as many blocks as divide the channels and fit kTileBytes,
// keeping kMinTasks tasks. (plan_rows re-derives the block's width when this narrows it.)
void choose_plane_tile(Plan& pl, const Problem& p, const TuningHints& h) {
  const int64_t n_vec = p.c_out / pl.lanes;
  check_hint(!h.oc_vectors || n_vec % h.oc_vectors == 0,
             "layout plane_tiles: oc_vectors must divide the channel vectors (" + std::to_string(n_vec) + ")");
  // (and a block's planes within kTileBytes where one vector's are)
  while (!h.oc_vectors && pl.oc_vectors > 1 &&
         (n_vec % pl.oc_vectors != 0 || pl.oc_vectors * pl.lanes * channel_bytes(p) > kTileBytes))
    --pl.oc_vectors;
  const int64_t block = int64_t{pl.oc_vectors} * pl.lanes, blocks = p.c_out / block;
  int64_t per_tile = 1;
  for (int64_t d = 2; d <= blocks; ++d)
    if (blocks % d == 0 && d * block * channel_bytes(p) <= kTileBytes && pl.batch * (blocks / d) >= kMinTasks)
      per_tile = d;
  pl.channels_per_call = per_tile * block;
  if (h.channels_per_call) {
    check_hint(h.channels_per_call % block == 0 && p.c_out % h.channels_per_call == 0,
               "layout plane_tiles: channels_per_call must be a multiple of oc_vectors x lanes (" +
                   std::to_string(block) + ") dividing the channels (" + std::to_string(p.c_out) + ")");
    pl.channels_per_call = h.channels_per_call;
  }
}

}  // namespace deconvjit::detail
