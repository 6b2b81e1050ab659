// Kernels named in profilers (DECONVJIT_JIT_PROFILE). Without help, `perf` attributes samples in JIT code
// to an anonymous mapping; with it, to the kernel:
// - perfmap: a line "START SIZE NAME" (hex, hex, text) per kernel appended to /tmp/perf-PID.map, which
//   `perf report` reads by itself;
// - jitdump: a jitdump file (tools/perf/Documentation/jitdump-specification.txt in the Linux tree) with
//   each kernel's code bytes, at $DECONVJIT_JIT_PROFILE_DIR/jit-PID.dump (default /tmp), for
//   `perf record -k 1`, `perf inject --jit` and `perf annotate` on the generated instructions.
// The variable holds "perfmap", "jitdump" or both comma-separated; unset, empty, "0" or "off" is off (the
// default). It is read once, when the first kernel's code becomes executable. Every kernel is reported
// when its code becomes executable, compiled or loaded from the disk cache; a col kernel through its inner
// GEMM kernel, which is the one holding code. Nothing is written when code is freed: a perf map can then
// hold two lines for a reused address (jitdump's timestamps keep them apart).
#pragma once

#include <cstddef>
#include <string>

namespace deconvjit::detail {

enum JitProfileFlags : unsigned { kJitProfileOff = 0, kJitProfilePerfMap = 1, kJitProfileJitDump = 2 };

// Parses a DECONVJIT_JIT_PROFILE value; false for anything else (the caller says so and stays off).
bool parse_jit_profile(const std::string& value, unsigned* flags);

// Replaces the process's settings, as reading the environment would (files are opened, the jitdump header
// written and mapped now); `jitdump_dir` empty means /tmp. The map file is always /tmp/perf-PID.map unless
// `perfmap_dir` says otherwise (only tests should: perf looks nowhere else). Closes files opened before.
// Failures to open a file are reported on stderr and turn that output off.
void jit_profile_configure(unsigned flags, const std::string& jitdump_dir, const std::string& perfmap_dir = "/tmp");

// Where the current settings write ("" when that output is off).
std::string jit_profile_perfmap_path();
std::string jit_profile_jitdump_path();

// Reports that `size` bytes at `code` are now executable and hold the kernel `name`. Thread-safe; never
// throws; does nothing when profiling is off.
void jit_profile_code(const void* code, size_t size, const std::string& name);

}  // namespace deconvjit::detail
