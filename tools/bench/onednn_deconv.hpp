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

// The ways oneDNN can run one problem. Weights are always in the layout oneDNN prefers, reordered once.
enum class OnednnRun {
  plain_ncx,     // src and dst plain NCX tensors (oneDNN's nchw, ncw, ncdhw)
  plain_nxc,     // src and dst plain NXC tensors (nhwc, nwc, ndhwc)
  any_from_ncx,  // src and dst in the formats oneDNN prefers (`any`), reorders from and back to NCX timed
  any_from_nxc,  // the same from and back to NXC
  any_kernel,    // `any` formats with the data already there: the primitive alone, as an engine that keeps
                 // tensors in oneDNN's blocked layouts between layers runs it
};
const char* to_string(OnednnRun run);

class OnednnDeconv {
 public:
  // Builds the plain primitives for both layouts and the `any` one, in the problem's dtype. `src` and `dst`
  // are the caller's buffers in the problem's data_format (`weights` in its weights_format), elements of
  // its dtype; the other layout's tensors and the `any` tensors belong to this object, filled once by
  // reorders from `src`. A variant this oneDNN has no implementation for (a 16-bit type in oneDNN 2.6) is
  // left out (`has` says which) and `why` says "onednn: unsupported for f16". Returns null and sets `why`
  // when there is no variant at all, or oneDNN cannot express the problem (for example negative pads).
  static std::unique_ptr<OnednnDeconv> create(const Problem& p, const void* src, const void* weights, void* dst,
                                              std::string* why);
  ~OnednnDeconv();

  bool has(OnednnRun r) const;  // any_from_* need the `any` primitive
  void run(OnednnRun run);
  // Puts the result of the last `run(r)` into the caller's dst (reordering when `r` wrote elsewhere), so it
  // can be compared with ours. Not timed.
  void result_to_user(OnednnRun r);
  std::string impl(OnednnRun r) const;  // oneDNN's implementation name, e.g. "jit:avx512_core"; "" if absent
  std::string any_src_format() const;   // the layout `any` chose for src, in oneDNN's notation ("aBcd16b")

 private:
  struct State;
  explicit OnednnDeconv(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace deconvjit::bench
