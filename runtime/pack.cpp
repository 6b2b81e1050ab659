// Weights from the user's format (OIX, XIO, GOIX) into the plan's layout:
// [group][channel block][kz][ky][kx][ic][vectors * lanes], zero-padded past the last channel.
#include <tbb/parallel_for.h>

#include <array>
#include <cstring>

#include "runtime/compiled_kernel.hpp"
#include "runtime/half.hpp"

namespace deconvjit::detail {
namespace {

// The user's weights in the problem's data type; at() widens to f32, which is exact for bf16 and f16.
struct UserWeights {
  const void* w;
  DType type;
  WeightsFormat fmt;
  int64_t c_in, ic_g, oc_g, taps;  // taps = prod(kernel)

  float at(int64_t g, int64_t ic, int64_t oc, int64_t k) const {
    const int64_t i = fmt == WeightsFormat::XIO ? (k * oc_g + oc) * c_in + g * ic_g + ic
                                                : ((g * ic_g + ic) * oc_g + oc) * taps + k;  // OIX, GOIX
    return type == DType::f32 ? static_cast<const float*>(w)[i]
                              : static_cast<float>(load_element(w, type, i));
  }
};

}  // namespace

namespace {

// Two bf16 channels in one 32-bit slot, as vdpbf16ps pairs them: `lo` (channel ic) in the low half, `hi`
// (ic + 1, zero when missing) in the high half. The values came from bf16, so their upper halves are exact.
void store_bf16_pair(float*& dst, float lo, float hi) {
  const uint32_t pair = float_to_bits(lo) >> 16 | (float_to_bits(hi) & 0xffff0000u);
  std::memcpy(dst++, &pair, sizeof pair);
}

// bf16_even_odd: slot L * (2m + odd) + i of a pair of L-lane vectors holds channel 2Lm + 2i + odd (the
// pair's even channels, then its odd ones, as the kernels split the dwords they load).
int64_t even_odd_channel(int64_t slot, int64_t L) {
  return slot / (2 * L) * (2 * L) + slot % L * 2 + slot % (2 * L) / L;
}

// dot: [group][kz][ky][kx][oc][ic padded to whole vectors].
// With ic_pairs each 32-bit slot holds two bf16 channels, in the order of the source. With bf16_even_odd
// the slots of each whole pair of vectors hold its even channels, then its odd ones (as the kernel splits
// them); the vectors after the last whole pair keep the source's order.
void pack_dot(const Plan& pl, const UserWeights& uw, int64_t taps, float* out) {
  const int64_t slots = pl.ic_vectors * pl.lanes, L = pl.lanes;
  const int64_t paired = pl.bf16_even_odd ? dot_even_odd_pairs(pl) * 2 * L : 0;  // slots in whole pairs
  tbb::parallel_for(int64_t{0}, pl.groups * taps, [&](int64_t t) {
    const int64_t g = t / taps, k = t % taps;
    float* dst = out + t * uw.oc_g * slots;
    auto w = [&](int64_t oc, int64_t ic) { return ic < uw.ic_g ? uw.at(g, ic, oc, k) : 0.f; };
    for (int64_t oc = 0; oc < uw.oc_g; ++oc)
      for (int64_t s = 0; s < slots; ++s) {
        if (!pl.ic_pairs) {
          *dst++ = w(oc, s < paired ? even_odd_channel(s, L) : s);
          continue;
        }
        store_bf16_pair(dst, w(oc, 2 * s), w(oc, 2 * s + 1));
      }
  });
}

// depthwise_x: [channel][kz][ky][x tap j][lane]; lane l of tap j holds kernel x (l + pad) mod s + s*j,
// zero past the kernel (see runtime/plan_depthwise_x.cpp). dot_x: the same per (input channel, output
// channel) pair, output channels inner: [ic][oc][kz][ky][j][lane].
void pack_depthwise_x(const Plan& pl, const UserWeights& uw, const std::array<int64_t, 3>& kd,
                      float* out) {
  const int64_t lanes = pl.lanes;
  const int64_t taps = pl.main.wei_k_floats / lanes;
  const int64_t per_channel = kd[0] * kd[1] * pl.main.wei_k_floats;
  const bool dot = pl.algorithm == Algorithm::dot_x;
  const int64_t pairs = dot ? pl.ic_per_group * pl.oc_per_group : pl.dst_channels;
  tbb::parallel_for(int64_t{0}, pairs, [&](int64_t c) {
    float* dst = out + c * per_channel;
    const int64_t g = dot ? 0 : c, ic = dot ? c / pl.oc_per_group : 0, oc = dot ? c % pl.oc_per_group : 0;
    for (int64_t kzy = 0; kzy < kd[0] * kd[1]; ++kzy)
      for (int64_t j = 0; j < taps; ++j)
        for (int64_t l = 0; l < lanes; ++l) {
          const int64_t kx = depthwise_x_kernel_x(pl.axes[2], l, j);
          *dst++ = kx < kd[2] ? uw.at(g, ic, oc, kzy * kd[2] + kx) : 0.f;
        }
  });
}

// gemm_x: [group][channel block][ic][block's oc][kz][ky][kx], the order of the kernel's broadcasts; with
// bf16 pairs each slot holds (ic, ic + 1), a missing ic + 1 zero.
void pack_gemm_x(const Plan& pl, const UserWeights& uw, float* out) {
  const int64_t per_channel = uw.taps, cb = pl.main.vectors, step = pl.ic_pairs ? 2 : 1;
  const int64_t group_floats = pl.packed_weights_floats() / pl.groups;
  tbb::parallel_for(int64_t{0}, pl.groups * pl.oc_blocks, [&](int64_t t) {
    const int64_t g = t / pl.oc_blocks, b = t % pl.oc_blocks;
    const int64_t channels = b == pl.oc_blocks - 1 ? pl.last.vectors : cb;
    float* dst = out + g * group_floats + b * ic_steps(pl) * pl.main.wei_k_floats;
    for (int64_t ic = 0; ic < pl.ic_per_group; ic += step)
      for (int64_t oc = b * cb; oc < b * cb + channels; ++oc)
        for (int64_t k = 0; k < per_channel; ++k) {
          if (!pl.ic_pairs) {
            *dst++ = uw.at(g, ic, oc, k);
            continue;
          }
          store_bf16_pair(dst, uw.at(g, ic, oc, k), ic + 1 < pl.ic_per_group ? uw.at(g, ic + 1, oc, k) : 0.f);
        }
  });
}

// col_x: [group][channel block][ic][kz][ky][block's oc][kx], the order of the kernel's broadcasts; with
// bf16 pairs each slot holds (ic, ic + 1) as vdpbf16ps pairs them, a missing ic + 1 zero.
void pack_col_x(const Plan& pl, const UserWeights& uw, const std::array<int64_t, 3>& kd, float* out) {
  const int64_t cb = pl.main.vectors, kzy = kd[0] * kd[1], step = pl.ic_pairs ? 2 : 1;
  const int64_t group_floats = pl.packed_weights_floats() / pl.groups;
  tbb::parallel_for(int64_t{0}, pl.groups * pl.oc_blocks, [&](int64_t t) {
    const int64_t g = t / pl.oc_blocks, b = t % pl.oc_blocks;
    const int64_t channels = b == pl.oc_blocks - 1 ? pl.last.vectors : cb;
    float* dst = out + g * group_floats + b * ic_steps(pl) * pl.main.wei_ic_step;
    for (int64_t ic = 0; ic < pl.ic_per_group; ic += step)
      for (int64_t zy = 0; zy < kzy; ++zy)
        for (int64_t oc = b * cb; oc < b * cb + channels; ++oc)
          for (int64_t kx = 0; kx < kd[2]; ++kx) {
            const int64_t k = zy * kd[2] + kx;
            if (!pl.ic_pairs) {
              *dst++ = uw.at(g, ic, oc, k);
              continue;
            }
            store_bf16_pair(dst, uw.at(g, ic, oc, k), ic + 1 < pl.ic_per_group ? uw.at(g, ic + 1, oc, k) : 0.f);
          }
  });
}

}  // namespace

void pack_weights_into(const CompiledKernel& k, const void* weights, float* out) {
  const Problem& p = k.problem;
  const Plan& pl = k.plan;
  std::array<int64_t, 3> kd{1, 1, 1};  // the user's kernel dims, z y x
  for (int i = 0; i < p.spatial_rank; ++i) kd[3 - p.spatial_rank + i] = p.kernel[i];
  const UserWeights uw{weights, p.dtype, p.weights_format, p.c_in, p.c_in_per_group(), p.c_out_per_group(),
                       kd[0] * kd[1] * kd[2]};
  if (pl.algorithm == Algorithm::col) return pack_col_weights(k, weights, out);
  if (pl.algorithm == Algorithm::dot) return pack_dot(pl, uw, uw.taps, out);
  if (x_vector_family(pl.algorithm)) return pack_depthwise_x(pl, uw, kd, out);
  if (pl.algorithm == Algorithm::gemm_x) return pack_gemm_x(pl, uw, out);
  if (pl.algorithm == Algorithm::col_x) return pack_col_x(pl, uw, kd, out);
  const bool gemm = pl.algorithm == Algorithm::gemm;
  const bool depthwise = pl.algorithm == Algorithm::depthwise;
  const int64_t kx_v = pl.axes[2].kernel;  // 1 when x is folded into the channels
  const int64_t ic_g = pl.ic_per_group;
  const int64_t block_main = kd[0] * kd[1] * kx_v * pl.main.wei_k_floats;
  const int64_t group_floats = pl.packed_weights_floats() / pl.groups;
  const int64_t step = pl.ic_pairs ? 2 : 1;

  tbb::parallel_for(int64_t{0}, pl.groups * pl.oc_blocks, [&](int64_t t) {
    const int64_t g = t / pl.oc_blocks, ob = t % pl.oc_blocks;
    const BlockKind& bk = ob == pl.oc_blocks - 1 ? pl.last : pl.main;
    const int64_t width = int64_t{bk.vectors} * pl.lanes;
    float* dst = out + g * group_floats + ob * block_main;
    for (int64_t kz = 0; kz < kd[0]; ++kz)
      for (int64_t ky = 0; ky < kd[1]; ++ky)
        for (int64_t kxv = 0; kxv < kx_v; ++kxv)
          for (int64_t ic = 0; ic < ic_g; ic += step) {
            for (int64_t c = 0; c < width; ++c) {
              const int64_t cc = pl.bf16_even_odd ? even_odd_channel(c, pl.lanes) : c;
              const int64_t ocv = ob * pl.main.vectors * pl.lanes + cc;
              auto weight = [&](int64_t i) {
                if (ocv >= pl.oc_per_group || i >= ic_g) return 0.f;
                // gemm: virtual channel = (phase, oc); phase r at virtual tap j is kernel x r + j*s.
                const int64_t kx = gemm ? ocv / uw.oc_g + kxv * p.stride.back() : kxv;
                const int64_t oc = gemm ? ocv % uw.oc_g : depthwise ? 0 : ocv;
                const int64_t grp = depthwise ? ocv : g;  // depthwise: the channel is the group
                return uw.at(grp, i, oc, (kz * kd[1] + ky) * kd[2] + kx);
              };
              if (!pl.ic_pairs) {
                *dst++ = weight(ic);
                continue;
              }
              store_bf16_pair(dst, weight(ic), weight(ic + 1));
            }
          }
  });
}

}  // namespace deconvjit::detail
