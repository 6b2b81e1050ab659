// deconvjit check DESC: the JIT against the oracle on seeded random data, judged by runtime/tolerance.hpp.
#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "bench/typed_buffer.hpp"
#include "cli.hpp"
#include "runtime/tolerance.hpp"

namespace deconvjit::cli {
namespace {

struct CheckArgs {
  std::string desc, isa = "best", hints;
  uint64_t seed = 1;
  int threads = 0;
};

void report_mismatch(const Problem& p, const verify::Comparison& c) {
  const verify::Mismatch& m = c.first.front();
  std::cerr << "error: " << c.failures << " of " << p.dst_elements()
            << " elements outside tolerance; first at dst index " << m.index << ": jit " << m.got
            << ", reference " << m.want << ", tolerance " << m.tol << "\n";
}

int check(const CheckArgs& a) {
  const Descriptor d = load_descriptor(a.desc);
  const Problem p = resolve(d);
  require_tensor_memory(p, "check", 2 * sizeof(double));  // + the reference's result and error bound
  Options options;
  options.max_isa = resolve_isa(isa_from_string(a.isa));  // throws IsaUnavailable before any work
  options.hints = load_hints(a.hints);
  Kernel kernel;
  // In the arena it runs in: compile() looks up tuning records by its concurrency.
  run_with_threads(a.threads, [&] { kernel = compile(d, options); });
  // The seeded floats every type draws, rounded into the problem's type (exact for f32).
  const verify::Operands ops = verify::random_operands(p, a.seed);
  const bench::TypedBuffer src = bench::typed_copy(ops.src, p.dtype);
  const bench::TypedBuffer weights = bench::typed_copy(ops.weights, p.dtype);
  const PackedWeights packed = kernel.pack_weights(weights.view());
  // NaN marks elements the kernel never wrote; they then fail the comparison.
  bench::TypedBuffer got(p.dtype, p.dst_elements());
  got.fill_nan();
  run_with_threads(a.threads, [&] { kernel.execute(src.view(), packed, got.view()); });

  std::vector<double> want(got.elements()), mag(got.elements());
  reference_with_bound(p, src.view(), weights.view(), want.data(), mag.data());
  const verify::Comparison c = verify::compare(p, got.view(), want.data(), mag.data(), p.dst_elements());

  nlohmann::ordered_json out;
  out["ok"] = c.ok;
  out["max_abs_err"] = c.max_abs_err;
  out["tolerance"] = c.tol_at_worst;  // at the element nearest its bound (16-bit: tolerances vary)
  out["worst_ratio"] = c.worst_ratio;  // max over elements of error / tolerance: at most 1 passes
  out["kernel"] = kernel.name();
  out["isa"] = to_string(kernel.isa());
  std::cout << out.dump() << std::endl;
  if (c.ok) return kOk;
  report_mismatch(p, c);
  return kMismatch;
}

Action setup_check(CLI::App& app) {
  auto* sub = app.add_subcommand("check", "Compare the JIT with the scalar reference on random data");
  auto a = std::make_shared<CheckArgs>();
  add_desc_argument(*sub, a->desc);
  add_isa_option(*sub, a->isa);
  add_hints_option(*sub, a->hints);
  sub->add_option("--seed", a->seed, "seed of the random src and weights")->capture_default_str();
  sub->add_option("--threads", a->threads, "threads for execute (0 = all)")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  return [a] { return check(*a); };
}

}  // namespace
}  // namespace deconvjit::cli

DECONVJIT_COMMAND(check, deconvjit::cli::setup_check);
