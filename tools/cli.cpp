#include "runtime/file_io.hpp"
#include "cli.hpp"

#include <sys/stat.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

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

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Error::Kind::Io, "cannot open '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
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

std::vector<float> read_f32_file(const std::string& path, int64_t elements, const std::string& what) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    throw Error(Error::Kind::Io, "cannot open " + what + " file '" + path + "': " + std::strerror(errno));
  }
  const auto actual = static_cast<int64_t>(in.tellg());
  const int64_t expected = elements * static_cast<int64_t>(sizeof(float));
  if (actual != expected) {
    throw Error(Error::Kind::InvalidArgument, what + " file '" + path + "' has " + std::to_string(actual) +
                                                  " bytes, expected " + std::to_string(expected) + " (" +
                                                  std::to_string(elements) + " f32 values)");
  }
  std::vector<float> data(static_cast<size_t>(elements));
  in.seekg(0);
  // x86-64 is little-endian, so the file's bytes are the floats' bytes.
  if (!in.read(reinterpret_cast<char*>(data.data()), expected)) {
    throw Error(Error::Kind::Io, "cannot read " + what + " file '" + path + "'");
  }
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

void run_with_threads(int threads, const std::function<void()>& body) {
  if (threads < 0) throw Error(Error::Kind::InvalidArgument, "--threads must be >= 0");
  if (threads == 0) return body();
  tbb::task_arena arena(threads);
  arena.execute(body);
}

}  // namespace deconvjit::cli
