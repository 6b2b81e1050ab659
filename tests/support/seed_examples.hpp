// The three worked examples of the OpenVINO ConvolutionBackpropData-1 specification (semantics.md section 4),
// with the output shapes the specification states.
#pragma once

#include <vector>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::testing {

struct SeedExample {
  Descriptor desc;
  std::vector<int64_t> dst, pads_begin, pads_end;  // as the specification gives them
};

inline std::vector<SeedExample> seed_examples() {
  std::vector<SeedExample> ex(3);
  for (SeedExample& e : ex) e.desc.weights = {20, 10, 3, 3};
  // 1: [1,20,224,224], s=2, pads 1/1 -> [1,10,447,447]
  ex[0].desc.src = {1, 20, 224, 224};
  ex[0].desc.strides = {2, 2}, ex[0].desc.pads_begin = {1, 1}, ex[0].desc.pads_end = {1, 1};
  ex[0].dst = {1, 10, 447, 447}, ex[0].pads_begin = {1, 1}, ex[0].pads_end = {1, 1};
  // 2: [1,20,2,2], s=3, pads 0, output_padding 2 -> [1,10,8,8]
  ex[1].desc.src = {1, 20, 2, 2};
  ex[1].desc.strides = {3, 3}, ex[1].desc.pads_begin = {0, 0}, ex[1].desc.pads_end = {0, 0};
  ex[1].desc.output_padding = {2, 2};
  ex[1].dst = {1, 10, 8, 8}, ex[1].pads_begin = {0, 0}, ex[1].pads_end = {0, 0};
  // 3: auto_pad valid (given pads ignored), s=1, output_shape [450,450] -> [1,10,450,450]
  ex[2].desc.src = {1, 20, 224, 224};
  ex[2].desc.strides = {1, 1}, ex[2].desc.pads_begin = {1, 1}, ex[2].desc.pads_end = {1, 1};
  ex[2].desc.auto_pad = AutoPad::Valid, ex[2].desc.output_shape = {450, 450};
  ex[2].dst = {1, 10, 450, 450}, ex[2].pads_begin = {0, 0}, ex[2].pads_end = {0, 0};
  return ex;
}

}  // namespace deconvjit::testing
