// The same transposed convolution run through oneDNN, the way oneDNN's own users write it
// (deconvolution_forward, deconvolution_direct, forward_inference), for `deconvjit bench --vs onednn`.
// Compiled only when CMake found oneDNN (DECONVJIT_HAVE_ONEDNN); no oneDNN type appears here.
#pragma once

#include <memory>
#include <string>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::bench {

// Process-wide oneDNN settings. Call before creating any OnednnDeconv: oneDNN fixes its ISA when it builds
// its first primitive. `threads` caps oneDNN's OpenMP pool (0 = leave it alone).
void onednn_configure(Isa max_isa, int threads);
std::string onednn_version();

class OnednnDeconv {
 public:
  // Builds both variants on the caller's buffers (in the problem's layouts; `weights` in its weights_format,
  // reordered into oneDNN's layout here, once). Returns null and sets `why` when oneDNN cannot express the
  // problem (for example negative pads) or refuses it.
  static std::unique_ptr<OnednnDeconv> create(const Problem& p, const float* src, const float* weights,
                                              float* dst, std::string* why);
  ~OnednnDeconv();

  // (a) src and dst memory descriptors in the user's layout; weights in oneDNN's preferred layout.
  void run_user_layout();
  // (b) src and dst in the layouts oneDNN prefers ("any"), with the reorders from and back to the user's
  // layout counted as part of the run, as a user who keeps plain tensors would pay them.
  void run_any_layout();
  std::string impl_user_layout() const;  // oneDNN's implementation names, e.g. "jit:avx512_core"
  std::string impl_any_layout() const;

 private:
  struct State;
  explicit OnednnDeconv(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace deconvjit::bench
