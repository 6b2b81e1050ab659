#include "cli.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <tbb/info.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "bench/pinning.hpp"
#include "runtime/file_io.hpp"
#include "runtime/memory.hpp"

namespace deconvjit::cli {

int exit_code(Error::Kind kind) {
  switch (kind) {
    case Error::Kind::InvalidDescriptor:
    case Error::Kind::InvalidArgument:
    case Error::Kind::Io: return kInvalid;
    case Error::Kind::IsaUnavailable: return kIsaUnavailable;
    case Error::Kind::Unsupported: return kUnsupported;
    case Error::Kind::Internal: return kInternal;
  }
  return kInternal;
}

namespace {
// A function-local static, so registrations from other files' static initialisers find it constructed.
std::map<std::string, Setup>& registry() {
  static std::map<std::string, Setup> commands;
  return commands;
}

// A descriptor file is a few hundred bytes; the cap keeps `@/dev/zero` from reading forever.
constexpr size_t kMaxDescriptorFileBytes = size_t{64} << 20;

[[noreturn]] void file_error(Error::Kind kind, const std::string& what, const std::string& path,
                             const std::string& why) {
  throw Error(kind, "cannot read " + what + "'" + path + "': " + why);
}

// Opens `path` for reading and rejects a directory by name (reading one would fail in confusing ways).
detail::FileDescriptor open_input(const std::string& path, const std::string& what, struct stat& st) {
  detail::FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) file_error(Error::Kind::Io, what, path, std::strerror(errno));
  if (::fstat(fd.get(), &st) != 0) file_error(Error::Kind::Io, what, path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) file_error(Error::Kind::InvalidArgument, what, path, "it is a directory");
  return fd;
}

// Pipes (`@/dev/stdin`, `@<(cmd)`) are read like files, up to the cap.
std::string read_text_file(const std::string& path) {
  struct stat st {};
  const detail::FileDescriptor fd = open_input(path, "", st);
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) file_error(Error::Kind::Io, "", path, std::strerror(errno));
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > kMaxDescriptorFileBytes)
      file_error(Error::Kind::InvalidArgument, "", path,
                 "larger than " + std::to_string(kMaxDescriptorFileBytes >> 20) + " MiB, too large for a descriptor");
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}
}  // namespace

bool register_command(const char* name, Setup setup) {
  registry()[name] = setup;
  return true;
}

const std::map<std::string, Setup>& registered_commands() { return registry(); }

Descriptor load_descriptor(const std::string& desc) {
  if (!desc.empty() && desc[0] == '@') return descriptor_from_json(read_text_file(desc.substr(1)));
  return descriptor_from_json(desc);
}

void add_desc_argument(CLI::App& sub, std::string& desc) {
  sub.add_option("DESC", desc, "problem descriptor: a JSON object, or @path to a file holding one")
      ->required();
}

TuningHints load_hints(const std::string& hints) {
  if (hints.empty()) return {};
  if (hints[0] == '@') return hints_from_json(read_text_file(hints.substr(1)));
  return hints_from_json(hints);
}

void add_hints_option(CLI::App& sub, std::string& hints) {
  sub.add_option("--hints", hints,
                 "tuning hints: a JSON object such as '{\"ur_w\":4}', or @path (see `deconvjit plans`)");
}

void add_isa_option(CLI::App& sub, std::string& isa) {
  sub.add_option("--isa", isa, "highest ISA to use: best, avx2 or avx512_core")->capture_default_str();
}

bench::TypedBuffer read_tensor_file(const std::string& path, int64_t elements, DType t, const std::string& what) {
  struct stat st {};
  // Judged before the open, which would block on a FIFO: the size check needs a regular file anyway.
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    file_error(Error::Kind::InvalidArgument, what + " file ", path, "it is not a regular file");
  const detail::FileDescriptor fd = open_input(path, what + " file ", st);
  if (!S_ISREG(st.st_mode)) file_error(Error::Kind::InvalidArgument, what + " file ", path, "it is not a regular file");
  const int64_t actual = st.st_size;
  const int64_t expected = elements * static_cast<int64_t>(dtype_size(t));  // resolve() bounds the product
  if (actual != expected) {
    throw Error(Error::Kind::InvalidArgument, what + " file '" + path + "' has " + std::to_string(actual) +
                                                  " bytes, expected " + std::to_string(expected) + " (" +
                                                  std::to_string(elements) + " " + to_string(t) + " values)");
  }
  bench::TypedBuffer data(t, elements);
  // x86-64 is little-endian, so the file's bytes are the elements' bytes (bf16 and f16: their 16 bits).
  if (!detail::pread_all(fd.get(), data.data(), static_cast<size_t>(expected), 0))
    file_error(Error::Kind::Io, what + " file ", path, errno ? std::strerror(errno) : "it shrank while being read");
  return data;
}

using detail::write_all;

void write_file_atomically(const std::string& path, const void* data, size_t bytes) {
  std::string tmp = path + ".XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    throw Error(Error::Kind::Io, "cannot create a file next to '" + path + "': " + std::strerror(errno));
  }
  // mkstemp makes the file 0600; give the result the permissions a plain create would have.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  bool ok = ::fchmod(fd, 0666 & ~mask) == 0 && write_all(fd, static_cast<const char*>(data), bytes) &&
            ::fsync(fd) == 0;
  ok = (::close(fd) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error(Error::Kind::Io, "cannot write '" + path + "': " + why);
  }
}

void require_tensor_memory(const Problem& p, const std::string& command, uint64_t dst_extra_bytes) {
  using namespace detail;
  const auto width = static_cast<int64_t>(dtype_size(p.dtype));
  const uint64_t src = size_product({p.src_elements(), width}), weights = size_product({p.weights_elements(), width});
  const uint64_t dst = size_product({p.dst_elements(), width});
  const uint64_t packed = float_bytes(static_cast<uint64_t>(p.weights_elements()));
  const uint64_t dst_extra = size_product({p.dst_elements(), static_cast<int64_t>(dst_extra_bytes)});
  require_memory(add_bytes({src, weights, packed, dst, dst_extra}),
                 "'" + command + "' on this problem (src " + std::to_string(src) + " bytes, weights " +
                     std::to_string(weights) + ", dst " + std::to_string(dst) + ")");
}

void run_with_threads(int threads, const std::function<void()>& body) {
  if (threads < 0) throw Error(Error::Kind::InvalidArgument, "--threads must be >= 0");
  if (threads == 0) return body();
  tbb::task_arena arena(threads);
  arena.execute(body);
}

void run_timed(int threads, const std::function<void()>& body) {
  if (threads < 0) throw Error(Error::Kind::InvalidArgument, "--threads must be >= 0");
  tbb::task_arena arena(threads ? threads : tbb::info::default_concurrency());
  bench::WorkerPins pins(arena);
  arena.execute(body);
}

}  // namespace deconvjit::cli
