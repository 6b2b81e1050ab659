// deconvjit: transposed convolution (ConvolutionBackpropData) compiled to x86-64 machine code at run time.
//
// Lifecycle (XNNPACK-like): describe -> resolve (validate + shape inference) -> compile (plan + JIT, cached)
// -> pack_weights (once, at model load) -> execute (many times). No Xbyak or oneTBB types appear here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace deconvjit {

const char* version();  // "MAJOR.MINOR.PATCH"; part of every kernel-cache key

enum class DataFormat { NCX, NXC };
// GOIX is GroupConvolutionBackpropData's weights [G, C_IN/G, C_OUT/G, K...] (rank = data rank + 1).
enum class WeightsFormat { OIX, XIO, GOIX };
enum class AutoPad { Explicit, Valid, SameUpper, SameLower };
enum class DType { f32, bf16, f16 };
// `best` means: the best ISA this CPU supports, capped by DECONVJIT_MAX_ISA.
enum class Isa { best, avx2, avx512_core };

const char* to_string(DataFormat);
const char* to_string(WeightsFormat);
const char* to_string(AutoPad);
const char* to_string(DType);
const char* to_string(Isa);

// Every failure the library reports. `kind` lets tools map errors to exit codes.
class Error : public std::runtime_error {
 public:
  enum class Kind { InvalidDescriptor, Unsupported, IsaUnavailable, InvalidArgument, Io, Internal };
  Error(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// A transposed convolution as the user states it. Empty lists mean "the default" (semantics.md section 2).
struct Descriptor {
  std::vector<int64_t> src;       // data shape, in data_format order
  std::vector<int64_t> weights;   // weights shape, in weights_format order
  std::vector<int64_t> strides, dilations, pads_begin, pads_end, output_padding;
  AutoPad auto_pad = AutoPad::Explicit;
  std::vector<int64_t> output_shape;  // empty = absent; spatial sizes, or the full output shape (dst_shape)
  std::optional<int64_t> groups;      // absent = 1, or G of group-form weights
  DataFormat data_format = DataFormat::NCX;
  WeightsFormat weights_format = WeightsFormat::OIX;
  DType dtype = DType::f32;
  DType weights_dtype = DType::f32;   // must equal dtype; kept apart so a mismatch can be reported
  // The type sums are kept in: f32 (always allowed), or f16 with dtype f16 (halves all the way, an opt-in
  // for speed that needs avx512_fp16). The result is rounded once into dtype either way.
  DType accumulation = DType::f32;
  std::string name;                   // carried along, not part of the identity
};

// JSON <-> Descriptor. Parsing rejects unknown fields and wrong types, naming the field.
Descriptor descriptor_from_json(const std::string& json_text);
std::string to_json(const Descriptor& d);  // defaults filled in, includes "name" when set
// Canonical form: defaults filled, aliases resolved, fixed key order, no white space, no name.
// Equal problems give byte-identical strings. Throws Error for an invalid descriptor.
std::string canonical_json(const Descriptor& d);

// The resolved problem: validation passed, pads and output sizes computed. Spatial vectors have one entry
// per spatial axis, outermost first (Z, Y, X).
struct Problem {
  int spatial_rank = 0;  // 1, 2 or 3
  int64_t batch = 0, c_in = 0, c_out = 0, groups = 1;
  std::vector<int64_t> in, kernel, stride, dilation, pads_begin, pads_end, output_padding, out;
  DataFormat data_format = DataFormat::NCX;
  WeightsFormat weights_format = WeightsFormat::OIX;  // GOIX when the weights have the group form
  DType dtype = DType::f32;         // src, weights and dst
  DType accumulation = DType::f32;  // see Descriptor::accumulation
  std::vector<int64_t> src_shape, weights_shape, dst_shape;  // in the user's layouts
  std::string canonical;  // canonical_json of the descriptor

  int64_t c_in_per_group() const { return c_in / groups; }
  int64_t c_out_per_group() const { return c_out / groups; }
  int64_t src_elements() const;
  int64_t weights_elements() const;
  int64_t dst_elements() const;
  double flops() const;  // 2 * N * C_IN * (C_OUT/G) * prod(in) * prod(kernel)
};

// Validates and infers shapes. The only function that judges user input; throws Error(InvalidDescriptor)
// whose message names the field and the values.
Problem resolve(const Descriptor& d);

// Tuning choices: everything a plan decides that is not fixed by the problem. Zero / empty / -1 means
// "let the heuristic decide"; a value the problem cannot honour is rejected (InvalidArgument naming the
// hint), never silently ignored. Every plan prints its complete choices (Kernel::choices()), and those
// choices compile back to the same kernel: an autotuner searches exactly this space (enumerate_plans).
struct TuningHints {
  std::string algorithm; // "", "direct", "gemm", "depthwise", "dot", "depthwise_x", "gemm_x", "col", "dot_x",
                         // "col_x"
  std::string layout;    // NCX data only: "", "row_buffer", "in_kernel", "scratch", "src_copy" (dot)
  std::string isa;       // "", "avx2", "avx512_core": the instruction set the kernel is generated for, at most
                         // the cap (Options::max_isa). Unset: the cap, or AVX2 where the CPU runs AVX-512 at
                         // the AVX2 rate and 8-lane vectors hold the channels with fewer empty lanes.
  int ur_w = 0;          // output pixels per register block (gemm_x, col_x: input vectors; depthwise_x, dot_x:
                         // output vectors)
  int oc_vectors = 0;    // output-channel vectors per register block (gemm_x, depthwise_x, dot_x, col_x: channels)
  int ic_unroll = 0;     // input-channel loop unroll (dot_x, col_x: accumulator sets)
  int x_split = 0;       // parts each output row is split into for threading (through the NCX row buffer on
                         // AVX-512 rounded to whole cache lines, so possibly fewer)
  int ic_block = 0;      // input channels per reduction pass (must divide C_IN/G); 0: one pass
  int x_halo = -1;       // -1 heuristic, 0 off, 1 on: zero-pad the source in x so borders need no
                         // blocks of their own
  int batch_block = -1;  // -1 heuristic, 0 off, 1 on: register blocks run across images, not along x
  int parallel = -1;     // -1 heuristic, 0 on the calling thread, 1 on oneTBB
  int oc_loop = 0;       // depthwise: channel blocks one call walks (1, or all of them)
  int channels_per_call = 0;  // depthwise_x: channels one call walks (a multiple of oc_vectors)
  int rows_per_block = 0;     // gemm_x: input rows stacked in one register block
  int flat_plane = -1;        // gemm_x: -1 heuristic, 1: a block's vectors run across the whole plane
  int oc_chunk = 0, row_chunk = 0;  // gemm_x: a task's tile of channel blocks x row groups (L2 blocking)
  // gemm_x: -1 heuristic, 0 off, 1 on. On: a task first copies its row group's source, every input
  // channel, into one contiguous tile that all its channel blocks then read (input planes a page or more
  // apart collide in the caches' sets; a tile does not).
  int pack_src = -1;
  // bf16 data, direct and gemm families, CPUs with avx512_bf16: -1 heuristic (on), 0 off, 1 on. On:
  // input channels are reduced in pairs by vdpbf16ps (twice the f32 FMA rate), which treats subnormal
  // bf16 inputs as zero and flushes subnormal partial sums; off: widening to f32, exact for every input.
  int ic_pairs = -1;
  // Output written straight into dst in whole cache lines (NXC: direct, gemm, depthwise, where a vector is
  // half a line (f32 on AVX2, 16-bit data on AVX-512) with an even number of vectors per block; f32 NCX on
  // AVX-512: depthwise_x, dot_x; NCX through the row buffer on AVX-512, output rows of whole lines: its
  // flush): -1 heuristic, 0 off, 1 on. On:
  // whole output vectors are written with non-temporal stores (vmovntps) where a block starts on a cache
  // line, so an output far larger than the caches goes to memory without first being read into them.
  int nt_stores = -1;
  // bf16 and f16 data in the direct, gemm, depthwise and dot families without channel pairs: -1 heuristic, 0
  // off, 1 on. On: the source is widened to f32 once (exactly) into a copy that the kernel reads like
  // f32 data, instead of widening every element each time a tap reads it; the output keeps its type.
  int widen_src = -1;
  // NCX through the row buffer (direct and gemm families) or the dot family's NCX source copy, or NXC with
  // widen_src (direct, gemm, dot); 2-D, or 3-D with one kernel z tap per output plane: -1 heuristic, 0 off,
  // n > 0: a task takes a band of n output rows of one image (3-D: of one output plane), transposes (NXC:
  // widens) the input rows they read into a thread-local NXC band and runs the band's rows on it, instead
  // of the whole source being transposed (widened) first.
  int band_rows = -1;
  // depthwise family (NXC rows): -1 heuristic, 0 off, 1 on. On: the 2 or more x taps of an output phase
  // are done in one pass over the source pixels, each loaded (and widened) once for all of them, instead
  // of one pass per tap. The same sums, bit for bit.
  int fuse_x_taps = -1;
  // direct and gemm families with the x halo: -1 heuristic, 0 off, 1 on. On: a register block at a row's
  // border (one that reads the halo's zero columns) runs its own function, whose x taps are unrolled and
  // which does each tap's FMAs only for the pixels whose source column is real. The zeros' FMAs are
  // skipped; a NaN or infinite weight then no longer meets them (0 x inf), as the reference never does.
  int edge_blocks = -1;
  // direct and gemm families on AVX2 (not depthwise): 0 heuristic, n: a register block keeps n of its
  // oc_vectors weight vectors in registers and its FMAs read the others from memory (a load folded into
  // the FMA). The registers freed make room for a third pixel of four vectors (3 x 4), which broadcasts
  // each source element for four FMAs instead of two.
  int weight_regs = 0;
  // direct, gemm and dot families on NXC data (blocks along x), and col_x: -1 heuristic, 0 off, 1 on. On:
  // while a register block works, it asks (prefetcht0) for the source the next block along the row will
  // read, so that a source streamed from memory arrives before the FMAs wait for it (col_x: each channel
  // row's piece two tiles on).
  int prefetch_src = -1;
  // direct, gemm and dot families of a grouped layer (G > 1) run by row tasks: -1 heuristic, 0 off, 1 on.
  // On: consecutive tasks take the groups of one row part in turn (group innermost), so the channels of
  // every group of a source pixel are read close together in time; off: a task range walks one group's
  // rows before the next group's.
  int group_inner = -1;
  // direct and gemm families with several channel blocks per group, run by row tasks: -1 heuristic, 0 off,
  // 1 on. On: consecutive tasks take the channel blocks of one row part in turn (channel block innermost),
  // so a row's output lines are finished while they are in cache (NCX through the row buffer: one task runs
  // every block of its row part into one buffer and flushes it once); off: a task range walks one channel
  // block's rows before the next block's.
  int oc_inner = -1;

  bool empty() const;  // every field left to the heuristic
};
// JSON object with the fields that are set ("{}" when none). Parsing rejects unknown fields and wrong
// types with InvalidArgument naming the field.
std::string to_json(const TuningHints& h);
TuningHints hints_from_json(const std::string& json_text);

struct Options {
  Isa max_isa = Isa::best;   // a cap; DECONVJIT_MAX_ISA caps it further
  bool use_cache = true;     // the in-memory kernel cache
  TuningHints hints;         // when any is set, the tuning database is not consulted
  // The tuning database compile() consults when no hint is given: unset = default_tuning_db(); empty =
  // none. A record made for this problem, ISA, thread count, CPU model and library version supplies the
  // hints; one whose hints no longer build is ignored (DECONVJIT_VERBOSE=1 says which plan was used, why).
  std::optional<std::string> tuning_db;
  // The on-disk kernel cache (docs/CACHE.md): compiled code kept across processes.
  bool use_disk_cache = true;
  std::optional<std::string> cache_dir;  // unset = default_cache_dir(); empty = disabled
};

struct CacheStats {
  uint64_t hits = 0, misses = 0;
  size_t size = 0, capacity = 0;
};
CacheStats cache_stats();
void cache_clear();
void cache_set_capacity(size_t capacity);  // 0 disables the cache

// The on-disk kernel cache. Its directory: DECONVJIT_CACHE_DIR if set (set but empty = disabled), else
// $XDG_CACHE_HOME/deconvjit, else ~/.cache/deconvjit ("" = disabled).
std::string default_cache_dir();

// What compile(d, options) would find on disk, without compiling or writing anything.
struct DiskCacheLookup {
  std::string path;     // the entry's file; empty when the disk cache is disabled
  bool usable = false;  // a valid entry that compile() would load
  std::string reason;   // when not usable: "absent", or why the entry is rejected or ignored
};
DiskCacheLookup disk_cache_lookup(const Descriptor& d, const Options& options = {});

// One entry file, checked exactly as compile() checks it before loading.
struct DiskCacheEntry {
  std::string path, descriptor, isa, kernel_name, library_version;
  uint64_t file_size = 0, code_size = 0;
  bool valid = false;
  std::string error;  // why it would be rejected or ignored; empty when valid
};
std::vector<DiskCacheEntry> disk_cache_entries(const std::string& dir);  // sorted by file name
size_t disk_cache_clear(const std::string& dir);  // removes entries and stale temporaries; returns count

// Tensor memory as the API takes it: a pointer, the element type and the element count, so every call
// checks what it is given against the problem (a wrong type or size is an InvalidArgument error, never a
// read past the end). The same form serves the C++ API and the Python module. f32 is `float`; f16 and
// bf16 elements are their 16 bits in a `uint16_t`. Views only: the caller owns the memory.
struct ConstBuffer {
  const void* data = nullptr;
  DType dtype = DType::f32;
  size_t elements = 0;
  ConstBuffer() = default;
  ConstBuffer(const void* d, DType t, size_t n) : data(d), dtype(t), elements(n) {}
  ConstBuffer(const float* d, size_t n) : data(d), dtype(DType::f32), elements(n) {}
  ConstBuffer(const std::vector<float>& v) : ConstBuffer(v.data(), v.size()) {}  // NOLINT: a view
};
struct Buffer {
  void* data = nullptr;
  DType dtype = DType::f32;
  size_t elements = 0;
  Buffer() = default;
  Buffer(void* d, DType t, size_t n) : data(d), dtype(t), elements(n) {}
  Buffer(float* d, size_t n) : data(d), dtype(DType::f32), elements(n) {}
  Buffer(std::vector<float>& v) : Buffer(v.data(), v.size()) {}  // NOLINT: a view
  operator ConstBuffer() const { return {data, dtype, elements}; }  // NOLINT: a narrower view
};
size_t dtype_size(DType t);  // bytes per element

class Kernel;

// Weights in the kernel's packed layout. Keep it next to the Kernel that made it.
class PackedWeights {
 public:
  PackedWeights() = default;
  size_t size_bytes() const { return data_ ? bytes_ : 0; }
  const float* data() const { return data_.get(); }
  const std::string& kernel_name() const { return kernel_name_; }

 private:
  friend class Kernel;
  std::shared_ptr<float> data_;
  size_t bytes_ = 0;
  std::string kernel_name_;
  std::string layout_;  // Plan::packing_signature(): names alone do not encode channel counts
};

namespace detail { struct CompiledKernel; }

// A compiled kernel. Cheap to copy; the code lives while any handle or cache entry holds it.
class Kernel {
 public:
  Kernel() = default;
  const Problem& problem() const;
  const std::string& name() const;  // derived from the plan, e.g. deconv_f32_nxc_s2x2_k4x4_ur6x4__avx512_core
  Isa isa() const;
  std::string plan_text() const;    // the plan, printable (JSON)
  const TuningHints& choices() const;  // the plan's complete choices: these hints build it again
  const uint8_t* code() const;      // the generated machine code (read + execute memory)
  size_t code_size() const;
  double compile_ms() const;        // time the JIT took for this kernel (0 if loaded from the disk cache)

  PackedWeights pack_weights(ConstBuffer weights) const;  // weights in the descriptor's weights_format
  // src, dst in the descriptor's data_format. Thread-safe; uses the caller's task_arena if any. dst is
  // written only after every argument has been checked.
  void execute(ConstBuffer src, const PackedWeights& weights, Buffer dst) const;
  // Convenience: packs on the fly (slow for repeated calls).
  void execute(ConstBuffer src, ConstBuffer weights, Buffer dst) const;

  explicit operator bool() const { return static_cast<bool>(impl_); }
  const detail::CompiledKernel* impl() const { return impl_.get(); }
  explicit Kernel(std::shared_ptr<const detail::CompiledKernel> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<const detail::CompiledKernel> impl_;
};

Kernel compile(const Descriptor& d, const Options& options = {});

// The plan space, for autotuning (docs/TUNING.md). One candidate: the complete hints that build it
// (compile with Options::hints = hints builds exactly this kernel), its kernel name, and the cost model's
// estimate for `threads` threads (a ranking aid, not a measurement).
struct PlanCandidate {
  std::string kernel;
  TuningHints hints;
  double model_ms = 0;
};
// Every distinct plan the emitters can build for the problem under the cap `isa` (Isa::best: as compile()
// resolves it; under an AVX-512 cap AVX2 plans too, each naming its ISA in hints.isa): every applicable family, NCX layout route, halo and batch blocking, every register tile that fits,
// and the numeric choices (ic_unroll, x_split, ic_block, threading, and the families' own blocking) over a
// ladder of values (docs/TUNING.md lists it). Sorted by model_ms, fastest first; `threads` 0 means the
// default arena's concurrency.
// Tiles are expanded into their numeric choices one after another in the model's order of each register
// tile's own plan. `max_seconds` > 0 bounds that (a 1-D row of 19150 outputs has 422642 plans, 21 s of
// planning): once it has passed (checked between tiles, so a little later), the remaining tiles add their
// own plan only, so every family, route and tile keeps a candidate. `*complete` (if given) says whether
// every tile was expanded.
std::vector<PlanCandidate> enumerate_plans(const Problem& p, Isa isa = Isa::best, int threads = 0,
                                           double max_seconds = 0, bool* complete = nullptr);
// The numeric variants (unrolling, splits, threading, blocking, store and copy switches) of the register
// tile that `hints` name, as enumerate_plans lists them: for a candidate whose tile a time limit left
// unexpanded.
std::vector<PlanCandidate> enumerate_variants(const Problem& p, Isa isa, int threads, const TuningHints& hints);
// The plan of `hints` as JSON (what Kernel::plan_text() prints), without compiling it. Throws like
// compile() for hints the problem cannot honour.
std::string plan_json(const Problem& p, Isa isa, const TuningHints& hints);

// The tuning database (docs/TUNING.md): a JSON Lines file, one record per problem and machine, written by
// `deconvjit tune` and read by compile(). Its path: DECONVJIT_TUNING_DB if set (set but empty = none),
// else $XDG_CONFIG_HOME/deconvjit/tuning.jsonl, else ~/.config/deconvjit/tuning.jsonl.
struct TuningRecord {
  // The key: the problem's canonical descriptor, ISA, threads (the arena's concurrency), CPU model name
  // and library version. Everything else describes the result.
  std::string descriptor;
  Isa isa = Isa::avx2;
  int threads = 1;
  std::string cpu, version;
  std::string name;  // the descriptor's name, for people reading the file
  TuningHints hints;
  std::string kernel, default_kernel;
  double tuned_ms = 0, default_ms = 0;
  int candidates = 0;  // plans timed
};
std::string default_tuning_db();
std::string cpu_model_name();  // /proc/cpuinfo's "model name" (the key's CPU)
// A record for this process: cpu and version of this machine and build.
TuningRecord make_tuning_record(const Problem& p, Isa isa, int threads);
// Every well-formed record, in file order; a missing file has none. Lines that do not parse are skipped
// and, when `errors` is given, described there (line number and reason).
std::vector<TuningRecord> tuning_db_read(const std::string& path, std::vector<std::string>* errors = nullptr);
// Adds `r`, replacing a record with the same key. The file is locked while it is read, merged and
// replaced by rename, so concurrent tuners lose nothing and readers never see half a file.
void tuning_db_store(const std::string& path, const TuningRecord& r);
// Removes the file; returns how many records it held.
size_t tuning_db_clear(const std::string& path);

// The ISA cap `compile` would plan under with these options on this CPU (the kernel's own ISA is the plan's
// choice, Kernel::isa(): AVX2 code under an AVX-512 cap on some CPUs, see TuningHints::isa); throws
// Error(IsaUnavailable) if the requested cap names an ISA the CPU lacks.
Isa resolve_isa(Isa requested);
bool isa_available(Isa isa);
Isa isa_from_string(const std::string& s);  // "avx2", "avx512_core", "best"; throws InvalidArgument

// The oracle: scalar, accumulates in double. src, weights, dst in the descriptor's layouts. Never fast.
// Buffers are checked against the problem (type and element count) like execute()'s.
void reference(const Problem& p, ConstBuffer src, ConstBuffer weights, Buffer dst);
// Same, also returning per-element sum of |x*w| (for tolerances); `dst` and `abs_sum` have
// dst_elements() entries.
void reference_with_bound(const Problem& p, ConstBuffer src, ConstBuffer weights, double* dst,
                          double* abs_sum);

}  // namespace deconvjit
