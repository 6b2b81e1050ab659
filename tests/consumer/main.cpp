// Resolves the specification's first example through the installed package and prints the output shape,
// which must be [1,10,447,447].
#include <deconvjit/deconvjit.hpp>

#include <iostream>

int main() {
  deconvjit::Descriptor d;
  d.src = {1, 20, 224, 224};
  d.weights = {20, 10, 3, 3};
  d.strides = {2, 2};
  d.pads_begin = {1, 1};
  d.pads_end = {1, 1};
  try {
    const deconvjit::Problem p = deconvjit::resolve(d);
    std::cout << "deconvjit " << deconvjit::version() << " dst";
    for (int64_t e : p.dst_shape) std::cout << ' ' << e;
    std::cout << '\n';
  } catch (const deconvjit::Error& e) {
    std::cerr << "error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
