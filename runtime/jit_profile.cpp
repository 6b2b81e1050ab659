#include "runtime/jit_profile.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace deconvjit::detail {
namespace {

// The jitdump layout, version 1 of the format (the specification's revision 2 only added a record type).
constexpr uint32_t kJitDumpMagic = 0x4A695444;  // "JiTD" read as a little-endian word
constexpr uint32_t kJitDumpVersion = 1;
constexpr uint32_t kJitCodeLoad = 0;

struct JitDumpHeader {
  uint32_t magic, version, total_size, elf_mach, pad1, pid;
  uint64_t timestamp, flags;
};
struct JitRecordHeader {
  uint32_t id, total_size;
  uint64_t timestamp;
};
struct JitCodeLoad {
  uint32_t pid, tid;
  uint64_t vma, code_addr, code_size, code_index;
};
static_assert(sizeof(JitDumpHeader) == 40 && sizeof(JitRecordHeader) == 16 && sizeof(JitCodeLoad) == 40,
              "jitdump structures must have the specification's sizes, without padding");

// `perf record -k 1` stamps samples with CLOCK_MONOTONIC; perf inject matches records to samples by time.
uint64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

bool write_all(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

void warn(const std::string& message) { std::fprintf(stderr, "deconvjit: warning: %s\n", message.c_str()); }

// Both files live in shared directories such as /tmp: never follow a planted symlink, and write only into
// a regular file of our own.
int open_own_file(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    warn("DECONVJIT_JIT_PROFILE: cannot open '" + path + "': " + std::strerror(errno) + "; that output is off");
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    ::close(fd);
    warn("DECONVJIT_JIT_PROFILE: '" + path + "' is not a regular file of this user; that output is off");
    return -1;
  }
  return fd;
}

class Profiler {
 public:
  static Profiler& instance() {
    static Profiler p;
    return p;
  }

  void configure(unsigned flags, const std::string& dump_dir, const std::string& map_dir) {
    std::lock_guard<std::mutex> lock(mu_);
    configure_locked(flags, dump_dir, map_dir);
  }

  void report(const void* code, size_t size, const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!configured_) configure_from_environment();
    if (map_fd_ >= 0) {
      char line[64];
      const int n = std::snprintf(line, sizeof line, "%lx %lx ", reinterpret_cast<unsigned long>(code),
                                  static_cast<unsigned long>(size));
      // One write per line: with O_APPEND, lines of other writers (another JIT in this process) never interleave.
      const std::string text = std::string(line, static_cast<size_t>(n)) + name + "\n";
      if (!write_all(map_fd_, text.data(), text.size())) give_up(map_fd_, map_path_);
    }
    if (dump_fd_ >= 0) write_code_load(code, size, name);
  }

  std::string map_path() {
    std::lock_guard<std::mutex> lock(mu_);
    return map_fd_ >= 0 ? map_path_ : "";
  }
  std::string dump_path() {
    std::lock_guard<std::mutex> lock(mu_);
    return dump_fd_ >= 0 ? dump_path_ : "";
  }

 private:
  void configure_from_environment() {
    const char* value = std::getenv("DECONVJIT_JIT_PROFILE");
    unsigned flags = kJitProfileOff;
    if (value && !parse_jit_profile(value, &flags)) {
      warn(std::string("DECONVJIT_JIT_PROFILE='") + value + "' is not perfmap, jitdump or both (comma-separated); "
           "profiling is off");
      flags = kJitProfileOff;
    }
    const char* dir = std::getenv("DECONVJIT_JIT_PROFILE_DIR");
    configure_locked(flags, dir ? dir : "", "/tmp");
  }

  void configure_locked(unsigned flags, const std::string& dump_dir, const std::string& map_dir) {
    close_files();
    configured_ = true;
    const std::string pid = std::to_string(::getpid());
    if (flags & kJitProfilePerfMap) {
      map_path_ = map_dir + "/perf-" + pid + ".map";
      map_fd_ = open_own_file(map_path_, O_WRONLY | O_APPEND);
    }
    if (flags & kJitProfileJitDump) {
      dump_path_ = (dump_dir.empty() ? std::string("/tmp") : dump_dir) + "/jit-" + pid + ".dump";
      dump_fd_ = open_own_file(dump_path_, O_RDWR | O_TRUNC);
      if (dump_fd_ >= 0) start_dump();
    }
  }

  // The header, then the executable mapping perf record notices: its MMAP event names this file, which is
  // how perf inject --jit finds it. The mapping stays until the settings change.
  void start_dump() {
    JitDumpHeader h{};
    h.magic = kJitDumpMagic;
    h.version = kJitDumpVersion;
    h.total_size = sizeof h;
    h.elf_mach = EM_X86_64;
    h.pid = static_cast<uint32_t>(::getpid());
    h.timestamp = monotonic_ns();
    if (!write_all(dump_fd_, &h, sizeof h)) {
      warn("DECONVJIT_JIT_PROFILE: writing '" + dump_path_ + "' failed; jitdump is off");
      ::close(dump_fd_);
      dump_fd_ = -1;
      return;
    }
    marker_bytes_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    marker_ = ::mmap(nullptr, marker_bytes_, PROT_READ | PROT_EXEC, MAP_PRIVATE, dump_fd_, 0);
    if (marker_ == MAP_FAILED) {
      marker_ = nullptr;
      warn("DECONVJIT_JIT_PROFILE: cannot map '" + dump_path_ + "' executable (" + std::strerror(errno) +
           "): perf inject will not find it; set DECONVJIT_JIT_PROFILE_DIR to a directory without noexec");
    }
  }

  void write_code_load(const void* code, size_t size, const std::string& name) {
    JitRecordHeader rh{};
    JitCodeLoad load{};
    rh.id = kJitCodeLoad;
    rh.total_size = static_cast<uint32_t>(sizeof rh + sizeof load + name.size() + 1 + size);
    rh.timestamp = monotonic_ns();
    load.pid = static_cast<uint32_t>(::getpid());
    load.tid = static_cast<uint32_t>(::syscall(SYS_gettid));
    load.vma = load.code_addr = reinterpret_cast<uint64_t>(code);
    load.code_size = size;
    load.code_index = next_index_++;
    std::vector<char> record(rh.total_size);
    char* p = record.data();
    std::memcpy(p, &rh, sizeof rh);
    std::memcpy(p += sizeof rh, &load, sizeof load);
    std::memcpy(p += sizeof load, name.c_str(), name.size() + 1);
    std::memcpy(p + name.size() + 1, code, size);
    if (!write_all(dump_fd_, record.data(), record.size())) give_up(dump_fd_, dump_path_);
  }

  // A full disk, say: one warning, then that output stops rather than warn at every kernel.
  void give_up(int& fd, const std::string& path) {
    warn("DECONVJIT_JIT_PROFILE: writing '" + path + "' failed (" + std::strerror(errno) + "); that output is off");
    ::close(fd);
    fd = -1;
  }

  void close_files() {
    if (marker_) ::munmap(marker_, marker_bytes_);
    marker_ = nullptr;
    for (int* fd : {&map_fd_, &dump_fd_}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }

  std::mutex mu_;
  bool configured_ = false;
  int map_fd_ = -1, dump_fd_ = -1;
  void* marker_ = nullptr;
  size_t marker_bytes_ = 0;
  std::string map_path_, dump_path_;
  uint64_t next_index_ = 0;
};

}  // namespace

bool parse_jit_profile(const std::string& value, unsigned* flags) {
  *flags = kJitProfileOff;
  if (value.empty() || value == "0" || value == "off") return true;
  for (size_t begin = 0; begin <= value.size();) {
    const size_t end = std::min(value.find(',', begin), value.size());
    const std::string word = value.substr(begin, end - begin);
    begin = end + 1;
    if (word == "perfmap") {
      *flags |= kJitProfilePerfMap;
    } else if (word == "jitdump") {
      *flags |= kJitProfileJitDump;
    } else {
      *flags = kJitProfileOff;
      return false;
    }
  }
  return true;
}

void jit_profile_configure(unsigned flags, const std::string& jitdump_dir, const std::string& perfmap_dir) {
  Profiler::instance().configure(flags, jitdump_dir, perfmap_dir);
}

std::string jit_profile_perfmap_path() { return Profiler::instance().map_path(); }
std::string jit_profile_jitdump_path() { return Profiler::instance().dump_path(); }

void jit_profile_code(const void* code, size_t size, const std::string& name) {
  try {
    Profiler::instance().report(code, size, name);
  } catch (const std::exception&) {
    // A profiler's bookkeeping must never fail a compile (bad_alloc while building a record, say).
  }
}

}  // namespace deconvjit::detail
