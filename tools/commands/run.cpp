// deconvjit run DESC --src F --weights F --dst F: computes one problem on raw little-endian files in the
// descriptor's dtype (4 bytes a value for f32, 2 for f16 and bf16).
#include <memory>

#include "cli.hpp"

namespace deconvjit::cli {
namespace {

struct RunArgs {
  std::string desc, src, weights, dst, isa = "best", hints;
  bool reference = false;
};

int run(const RunArgs& a) {
  const Descriptor d = load_descriptor(a.desc);
  const Problem p = resolve(d);
  require_tensor_memory(p, "run");
  Options options;
  options.max_isa = isa_from_string(a.isa);
  options.hints = load_hints(a.hints);
  // Every input (hints first: no file is read for a plan that cannot be built) is checked before the
  // output is touched.
  Kernel kernel;
  if (!a.reference) kernel = compile(d, options);
  const bench::TypedBuffer src = read_tensor_file(a.src, p.src_elements(), p.dtype, "src");
  const bench::TypedBuffer weights = read_tensor_file(a.weights, p.weights_elements(), p.dtype, "weights");
  bench::TypedBuffer dst(p.dtype, p.dst_elements());
  if (a.reference) {
    reference(p, src.view(), weights.view(), dst.view());
  } else {
    kernel.execute(src.view(), weights.view(), dst.view());
  }
  write_file_atomically(a.dst, dst.data(), dst.bytes());
  return kOk;
}

Action setup_run(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "run", "Compute dst from raw little-endian files in the descriptor's layouts and dtype (JIT by default)");
  auto a = std::make_shared<RunArgs>();
  add_desc_argument(*sub, a->desc);
  sub->add_option("--src", a->src, "input data file")->required();
  sub->add_option("--weights", a->weights, "weights file")->required();
  sub->add_option("--dst", a->dst, "output file (replaced only when everything succeeded)")->required();
  sub->add_flag("--reference", a->reference, "use the scalar reference instead of the JIT");
  add_isa_option(*sub, a->isa);
  add_hints_option(*sub, a->hints);
  return [a] { return run(*a); };
}

}  // namespace
}  // namespace deconvjit::cli

DECONVJIT_COMMAND(run, deconvjit::cli::setup_run);
