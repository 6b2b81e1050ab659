// deconvjit run DESC --src F --weights F --dst F: computes one problem on raw f32 files.
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
  const auto src = read_f32_file(a.src, p.src_elements(), "src");
  const auto weights = read_f32_file(a.weights, p.weights_elements(), "weights");
  std::vector<float> dst(static_cast<size_t>(p.dst_elements()));
  if (a.reference) {
    reference(p, src, weights, dst);
  } else {
    kernel.execute(src, weights, dst);
  }
  write_file_atomically(a.dst, dst.data(), dst.size() * sizeof(float));
  return kOk;
}

Action setup_run(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "run", "Compute dst from raw little-endian f32 files in the descriptor's layouts (JIT by default)");
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
