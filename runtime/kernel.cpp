// compile(): resolve -> plan -> emit -> map, through the kernel cache; and the Kernel handle's methods.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <oneapi/tbb/task_arena.h>

#include "jit/deconv_kernels.hpp"
#include "runtime/buffer.hpp"
#include "runtime/compiled_kernel.hpp"
#include "runtime/cpu.hpp"
#include "runtime/hints.hpp"
#include "runtime/tuning_db.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/jit_profile.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/memory.hpp"

namespace deconvjit {
namespace detail {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

bool verbose() {
  static const bool v = [] {
    const char* e = std::getenv("DECONVJIT_VERBOSE");
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  return v;
}

}  // namespace

std::shared_ptr<const CompiledKernel> build_kernel(const Problem& p, const Plan& plan) {
  const auto t0 = Clock::now();
  auto k = std::make_shared<CompiledKernel>();
  k->problem = p;
  k->plan = plan;
  const jit::EmittedCode code = jit::emit_kernel(plan);
  k->code = std::make_unique<jit::CodeBuffer>(code.bytes.data(), code.bytes.size());
  jit_profile_code(k->code->data(), k->code->size(), plan.name);
  for (int kind = 0; kind < 2; ++kind)
    for (size_t off : code.entries[kind])
      k->fns[kind].push_back(reinterpret_cast<jit::KernelFn>(
          reinterpret_cast<uintptr_t>(k->code->data() + off)));
  k->schedule = build_schedule(plan);
  k->compile_ms = ms_since(t0);
  return k;
}

}  // namespace detail

CacheStats cache_stats() { return detail::KernelCache::instance().stats(); }
void cache_clear() { detail::KernelCache::instance().clear(); }
void cache_set_capacity(size_t c) { detail::KernelCache::instance().set_capacity(c); }

namespace detail {
namespace {

}  // namespace

// Accumulation in halves is an opt-in for speed that only avx512_fp16 gives (validated in resolve()).
void check_accumulation(const Problem& p, Isa isa) {
  if (p.accumulation == DType::f32) return;
  if (isa != Isa::avx512_core || !cpu_has_avx512_fp16())
    throw Error(Error::Kind::Unsupported, std::string("accumulation f16 needs avx512_fp16 (vfmadd*ph); ") +
                                              (isa != Isa::avx512_core ? "the ISA cap is " + std::string(to_string(isa))
                                                                       : std::string("this CPU lacks it")));
  throw Error(Error::Kind::Unsupported, "accumulation f16 has no kernels yet; use accumulation f32");
}

namespace {

// The descriptor exactly as given (name aside), as bytes: equal bytes mean an equal problem, so a
// repeated compile() can find its kernel without validating again (resolve() costs microseconds).
std::string raw_key(const Descriptor& d, Isa isa, const TuningHints& h) {
  std::string k;
  auto put = [&k](int64_t v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
  auto list = [&](const std::vector<int64_t>& v) {
    put(static_cast<int64_t>(v.size()));
    for (int64_t x : v) put(x);
  };
  for (const auto* v : {&d.src, &d.weights, &d.strides, &d.dilations, &d.pads_begin, &d.pads_end,
                        &d.output_padding, &d.output_shape})
    list(*v);
  put(d.groups ? *d.groups : -1);
  for (int e : {static_cast<int>(d.auto_pad), static_cast<int>(d.data_format),
                static_cast<int>(d.weights_format), static_cast<int>(d.dtype),
                static_cast<int>(d.weights_dtype), static_cast<int>(d.accumulation), static_cast<int>(isa)})
    put(e);
  return k + hints_key_text(h);
}

}  // namespace
}  // namespace detail

Kernel compile(const Descriptor& d, const Options& options) {
  const auto t0 = detail::Clock::now();
  const Isa isa = resolve_isa(options.max_isa);
  std::optional<Problem> p;
  auto problem = [&]() -> const Problem& {
    if (!p) {
      p = resolve(d);
      detail::check_accumulation(*p, isa);
    }
    return *p;
  };
  detail::PlanSource source(options);
  // On a miss: load the kernel from the on-disk cache, or compile it and store it there.
  auto build = [&]() -> detail::KernelPtr {
    const Options& o = source.resolve_hints(problem(), isa);
    // col is a composite around an inner kernel that is itself compiled (and cached) like any other.
    const detail::Plan plan = detail::make_plan(problem(), isa, o.hints);
    if (plan.algorithm == detail::Algorithm::col) return detail::build_col(problem(), plan, o);
    return detail::build_or_load(problem(), isa, o);
  };
  detail::CacheLookup found;
  if (options.use_cache) {
    detail::KernelCache& cache = detail::KernelCache::instance();
    const std::string raw = detail::raw_key(d, isa, options.hints) + source.raw_suffix();
    std::optional<std::string> key = cache.alias(raw);
    if (!key) {
      key = problem().canonical + '|' + to_string(isa) + '|' + version() + '|' +
            detail::hints_key_text(source.resolve_hints(problem(), isa).hints);
      cache.add_alias(raw, *key);
    }
    found = cache.get_or_build(*key, build);
  } else {
    found.kernel = build();
  }
  if (detail::verbose())
    std::fprintf(stderr, "deconvjit: compile %s cache=%s %.3f ms plan=%s\n", found.kernel->plan.name.c_str(),
                 found.hit ? "hit" : "miss", detail::ms_since(t0),
                 found.hit && !source.looked_up() ? "cached" : source.why().c_str());
  return Kernel(found.kernel);
}

const Problem& Kernel::problem() const { return impl_->problem; }
const std::string& Kernel::name() const { return impl_->plan.name; }
Isa Kernel::isa() const { return impl_->plan.isa; }
std::string Kernel::plan_text() const { return impl_->plan.to_json(); }
const TuningHints& Kernel::choices() const { return impl_->plan.choices; }
const uint8_t* Kernel::code() const { return detail::weights_owner(*impl_).code->data(); }
size_t Kernel::code_size() const { return detail::weights_owner(*impl_).code->size(); }
double Kernel::compile_ms() const { return impl_->compile_ms; }

PackedWeights Kernel::pack_weights(ConstBuffer weights) const {
  if (!impl_) throw Error(Error::Kind::InvalidArgument, "pack_weights on an empty Kernel");
  const Problem& p = impl_->problem;
  detail::check_buffer(weights, p.dtype, p.weights_elements(), "pack_weights: weights");
  const size_t floats = static_cast<size_t>(detail::weights_owner(*impl_).plan.packed_weights_floats());
  detail::require_memory(detail::float_bytes(floats), "packing the weights");
  void* mem = nullptr;
  if (posix_memalign(&mem, 64, std::max<size_t>(floats, 1) * sizeof(float)) != 0)
    throw Error(Error::Kind::Internal, "out of memory packing weights");
  PackedWeights pw;
  pw.data_ = std::shared_ptr<float>(static_cast<float*>(mem), [](float* f) { std::free(f); });
  pw.bytes_ = floats * sizeof(float);
  pw.kernel_name_ = impl_->plan.name;
  pw.layout_ = impl_->plan.packing;
  detail::pack_weights_into(*impl_, weights.data, pw.data_.get());
  return pw;
}

void Kernel::execute(ConstBuffer src, const PackedWeights& w, Buffer dst) const {
  if (!impl_) throw Error(Error::Kind::InvalidArgument, "execute on an empty Kernel");
  const Problem& p = impl_->problem;
  detail::check_buffer(src, p.dtype, p.src_elements(), "execute: src");
  detail::check_buffer(dst, p.dtype, p.dst_elements(), "execute: dst");
  if (!w.data()) throw Error(Error::Kind::InvalidArgument, "execute: weights were never packed");
  if (w.layout_ != impl_->plan.packing ||
      w.size_bytes() !=
          static_cast<size_t>(detail::weights_owner(*impl_).plan.packed_weights_floats()) * sizeof(float))
    throw Error(Error::Kind::InvalidArgument, "execute: weights were packed for kernel '" +
                                                  w.kernel_name() + "', not '" + impl_->plan.name + "'");
  const auto t0 = detail::Clock::now();
  detail::execute_kernel(*impl_, src.data, w.data(), dst.data);
  if (detail::verbose())
    std::fprintf(stderr, "deconvjit: execute %s %.3f ms\n", impl_->plan.name.c_str(),
                 detail::ms_since(t0));
}

void Kernel::execute(ConstBuffer src, ConstBuffer weights, Buffer dst) const {
  execute(src, pack_weights(weights), dst);
}

}  // namespace deconvjit
