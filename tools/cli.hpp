// What every `deconvjit` subcommand shares: the command registry, exit codes, descriptor loading, and file
// helpers. A new subcommand is one file under tools/commands/ that ends with DECONVJIT_COMMAND(...); nothing
// else needs to change, so several people can add commands without touching a common list.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bench/typed_buffer.hpp"
#include "deconvjit/deconvjit.hpp"

namespace deconvjit::cli {

// Exit codes, documented in `deconvjit --help` and README.md.
enum Exit : int {
  kOk = 0,
  kMismatch = 1,        // check: the JIT result is outside the tolerance
  kInvalid = 2,         // invalid descriptor, argument, or input file
  kIsaUnavailable = 3,  // the requested ISA is missing on this CPU
  kUnsupported = 4,     // valid, but no kernel handles it
  kInternal = 5,
};
int exit_code(Error::Kind kind);  // the one place deconvjit::Error kinds become exit codes

// A subcommand adds itself to `app` (as a subcommand named like its registration) and returns what to run
// when the user picks it. Actions throw deconvjit::Error on failure; main turns that into a message and code.
using Action = std::function<int()>;
using Setup = Action (*)(CLI::App& app);
bool register_command(const char* name, Setup setup);
const std::map<std::string, Setup>& registered_commands();

// DESC: a JSON object given inline, or `@path` naming a file that holds one.
Descriptor load_descriptor(const std::string& desc);
void add_desc_argument(CLI::App& sub, std::string& desc);
void add_isa_option(CLI::App& sub, std::string& isa);  // --isa NAME, default "best"
// --hints JSON|@path: TuningHints; a hint the problem cannot honour fails compile() naming it (exit 2).
void add_hints_option(CLI::App& sub, std::string& hints);
TuningHints load_hints(const std::string& hints);  // "" = none

// Reads a raw little-endian file that must hold exactly `elements` values of type `t` (4 bytes for f32, 2
// for f16 and bf16). `what` names the operand in the error, which also gives the expected and actual byte
// counts and the type.
bench::TypedBuffer read_tensor_file(const std::string& path, int64_t elements, DType t, const std::string& what);
// Writes through a temporary file in the same directory and renames it, so `path` is either untouched or
// complete.
void write_file_atomically(const std::string& path, const void* data, size_t bytes);

// Throws Error(InvalidDescriptor) saying how many bytes `command` needs when the problem's src, weights (as
// given, in the problem's type, and packed, counted as f32: the widest a kernel may pack them), dst and
// `dst_extra_bytes` per dst element exceed this machine's memory: checked
// before anything is allocated, so a too-large problem is the user's error, not std::bad_alloc.
void require_tensor_memory(const Problem& p, const std::string& command, uint64_t dst_extra_bytes = 0);

// Runs `body` in a oneTBB arena of `threads` threads (0 = the default arena).
void run_with_threads(int threads, const std::function<void()>& body);
// run_with_threads for timing (bench, tune): oneTBB's workers pinned one per CPU (bench/pinning.hpp; the
// caller pins itself with bench::pin_caller while our kernels run).
void run_timed(int threads, const std::function<void()>& body);

}  // namespace deconvjit::cli

#define DECONVJIT_COMMAND(name, setup) \
  static const bool deconvjit_command_##name = ::deconvjit::cli::register_command(#name, setup)
