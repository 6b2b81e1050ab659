// Fuzz target: descriptor JSON -> resolve -> plan + JIT -> execute, compared with the reference for
// problems small enough to run many per second. Any input may be rejected with deconvjit::Error; anything
// else (a crash, a sanitizer report, another exception, a result outside the tolerance) is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/tolerance.hpp"
#include "runtime/typed_data.hpp"

namespace {

using namespace deconvjit;

constexpr int64_t kMaxElements = 20000;  // per tensor
constexpr double kMaxFlops = 2e6;

void run_and_compare(const Descriptor& d, const Problem& p, Isa isa) {
  Options o;
  o.max_isa = isa;
  o.hints.isa = to_string(isa);  // that ISA's own code (an AVX-512 cap may plan AVX2 code on some CPUs)
  o.use_cache = false;
  o.use_disk_cache = false;
  Kernel k;
  try {
    k = compile(d, o);
  } catch (const Error& e) {
    if (e.kind() == Error::Kind::Unsupported || e.kind() == Error::Kind::IsaUnavailable) return;
    std::fprintf(stderr, "compile of a resolved problem threw kind %d: %s\n", static_cast<int>(e.kind()), e.what());
    std::abort();
  }
  // Operands and result in the problem's element type (f32, bf16 or f16).
  const verify::TypedOperands ops = verify::typed_operands(p, 1);
  verify::TypedData got(p.dtype, p.dst_elements());
  for (int64_t e = 0; e < got.count; ++e) got.set(e, std::numeric_limits<double>::quiet_NaN());
  k.execute(ops.src.view(), ops.weights.view(), got.view());
  std::vector<double> want(static_cast<size_t>(p.dst_elements())), mag(want.size());
  reference_with_bound(p, ops.src.view(), ops.weights.view(), want.data(), mag.data());
  const verify::Comparison c = verify::compare(p, got.view(), want.data(), mag.data(), p.dst_elements());
  if (!c.ok) {
    std::fprintf(stderr, "mismatch for %s on %s: %lld elements\n", p.canonical.c_str(), to_string(isa),
                 static_cast<long long>(c.failures));
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Descriptor d;
  Problem p;
  try {
    d = descriptor_from_json(text);
    p = resolve(d);
  } catch (const Error&) {
    return 0;  // rejected input: the expected outcome for almost everything
  }
  if (p.src_elements() > kMaxElements || p.weights_elements() > kMaxElements ||
      p.dst_elements() > kMaxElements || p.flops() > kMaxFlops)
    return 0;
  for (Isa isa : {Isa::avx2, Isa::avx512_core})
    if (isa_available(isa)) run_and_compare(d, p, isa);
  return 0;
}
