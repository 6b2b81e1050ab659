// The on-disk kernel cache: directory policy, safe reads and atomic writes of entries, the compile() hook,
// and the public listing / clearing functions. The entry format itself lives in disk_cache_entry.cpp.
#include "runtime/disk_cache.hpp"
#include "runtime/file_io.hpp"
#include "runtime/tuning_db.hpp"
#include "runtime/jit_profile.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <unordered_set>

namespace deconvjit {
namespace detail {
namespace {

// An entry is a few hundred KiB at most; anything far larger is not ours and is not read into memory.
constexpr off_t kMaxEntryBytes = off_t{256} << 20;

bool verbose() {
  const char* e = std::getenv("DECONVJIT_VERBOSE");
  return e && *e && std::strcmp(e, "0") != 0;
}

// One warning per subject and process: a model with many layers must not repeat the same complaint.
void warn_once(const std::string& subject, const std::string& message) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(subject).second) std::fprintf(stderr, "deconvjit: warning: %s\n", message.c_str());
}

std::string errno_text() { return std::strerror(errno); }

// Why a file or directory we did not make private must not be trusted ("" when it may be).
std::string ownership_problem(const struct stat& st) {
  if (st.st_uid != geteuid())
    return "owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
           std::to_string(geteuid()) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return "writable by group or others";
  return "";
}

// Why the directory must not be used ("" when it may): it must exist (with `create`, it is created) and
// only this user may write into it.
std::string dir_problem(const std::string& dir, bool create) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT && !create) return "absent";
    if (errno != ENOENT || !make_dirs(dir) || ::stat(dir.c_str(), &st) != 0)
      return "impossible to create (" + errno_text() + ")";
  }
  return S_ISDIR(st.st_mode) ? ownership_problem(st) : "not a directory";
}

bool dir_usable(const std::string& dir, bool create) {
  const std::string why = dir_problem(dir, create);
  if (why.empty()) return true;
  if (why != "absent")
    warn_once("dir:" + dir, "kernel cache directory '" + dir + "' is " + why + "; the disk cache is off");
  return false;
}

// Directories found safe are remembered for the life of the process: checking costs a stat per
// compile(). A directory that turns unsafe later is not noticed until a restart; that is acceptable
// because each entry is still checked on its own (owner, mode, no link, checksums, key) before it runs.
// A failed check is not remembered: it is done again on the next call.
struct CheckedDirs {
  std::mutex mu;
  std::unordered_set<std::string> safe;
  static CheckedDirs& instance() {
    static CheckedDirs d;
    return d;
  }
};

bool dir_usable_cached(const std::string& dir) {
  CheckedDirs& c = CheckedDirs::instance();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.safe.count(dir)) return true;
  }
  if (!dir_usable(dir, true)) return false;
  std::lock_guard<std::mutex> lock(c.mu);
  c.safe.insert(dir);
  return true;
}

void forget_dir(const std::string& dir) {
  CheckedDirs& c = CheckedDirs::instance();
  std::lock_guard<std::mutex> lock(c.mu);
  c.safe.erase(dir);
}

enum class FileState { Absent, Ignored, Invalid, Open };

struct OpenedFile {
  FileState state = FileState::Absent;
  std::string reason;
  FileDescriptor fd;
  uint64_t size = 0;
};

// Opens an entry without following links, and only if this user alone could have written it. O_NONBLOCK:
// a FIFO in the cache directory would otherwise block the open until a writer came, forever; with it the
// open returns at once and fstat rejects the FIFO like any other non-regular file. Regular files ignore it.
OpenedFile open_entry_file(const std::string& path) {
  OpenedFile r;
  r.fd = FileDescriptor(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (r.fd.get() < 0) {
    if (errno == ENOENT) return r;
    r.state = errno == ELOOP ? FileState::Ignored : FileState::Invalid;
    r.reason = errno == ELOOP ? "is a symbolic link" : "cannot be opened: " + errno_text();
    return r;
  }
  struct stat st;
  r.state = FileState::Ignored;
  if (::fstat(r.fd.get(), &st) != 0) {
    r.state = FileState::Invalid;
    r.reason = "cannot be examined: " + errno_text();
  } else if (!S_ISREG(st.st_mode)) {
    r.reason = "is not a regular file";
  } else if (std::string why = ownership_problem(st); !why.empty()) {
    r.reason = "is " + why;
  } else if (st.st_size > kMaxEntryBytes) {
    r.state = FileState::Invalid;
    r.reason = "is too large to be an entry";
  } else {
    r.state = FileState::Open;
    r.size = static_cast<uint64_t>(st.st_size);
  }
  return r;
}

// The front of an entry (everything before its code): one pread in the common case of a front that
// fits the first page.
std::vector<uint8_t> read_front(int fd, uint64_t file_bytes) {
  std::vector<uint8_t> front(static_cast<size_t>(std::min<uint64_t>(file_bytes, kDiskCodeAlign)));
  if (!pread_all(fd, front.data(), front.size(), 0)) throw std::runtime_error("truncated while reading");
  const uint64_t need = entry_front_bytes(front.data(), front.size(), file_bytes);
  if (need > front.size()) {
    const size_t have = front.size();
    front.resize(need);
    if (!pread_all(fd, front.data() + have, need - have, have))
      throw std::runtime_error("truncated while reading");
  }
  return front;
}

// Maps the code straight from the file, read+execute. Where the file system forbids executable
// mappings (noexec), the code is read and copied into a W^X buffer instead. Throws deconvjit::Error
// when neither works.
std::unique_ptr<jit::CodeBuffer> map_code(int fd, const EntryView& v) {
  try {
    return std::make_unique<jit::CodeBuffer>(jit::CodeBuffer::FromFile{}, fd, v.code_offset, v.code_bytes);
  } catch (const Error&) {
    std::vector<uint8_t> code(static_cast<size_t>(v.code_bytes));
    if (!pread_all(fd, code.data(), code.size(), v.code_offset))
      throw Error(Error::Kind::Io, "cannot read the code: " + errno_text());
    return std::make_unique<jit::CodeBuffer>(code.data(), code.size());
  }
}

enum class EntryState { Absent, Ignored, Invalid, Valid };

struct Lookup {
  EntryState state = EntryState::Absent;
  std::string reason;
  ValidEntry entry;
  std::unique_ptr<jit::CodeBuffer> code;
};

// Validates the front, maps the code and checks the code checksum over the mapped bytes, so what runs
// is exactly what was checked. Throws std::runtime_error for a bad entry, deconvjit::Error when a good
// one cannot be mapped.
void load_checked(int fd, uint64_t file_bytes, const EntryExpectation& want, Lookup& l) {
  const std::vector<uint8_t> front = read_front(fd, file_bytes);
  const EntryView v = parse_entry_front(front.data(), file_bytes);
  l.entry = check_entry(v, want, !build_has_id());
  l.code = map_code(fd, v);
  if (code_checksum(l.code->data(), l.code->size()) != v.code_sum) {
    l.code.reset();  // never reachable from a kernel
    throw std::runtime_error("checksum mismatch (corrupted code)");
  }
}

Lookup lookup_entry(const std::string& path, const EntryExpectation& want) {
  OpenedFile f = open_entry_file(path);
  Lookup l;
  l.reason = f.reason;
  if (f.state == FileState::Absent) return l;
  if (f.state == FileState::Ignored) {
    warn_once("entry:" + path, "ignoring kernel cache entry '" + path + "': it " + f.reason);
    l.state = EntryState::Ignored;
    return l;
  }
  l.state = EntryState::Invalid;
  if (f.state == FileState::Invalid) return l;
  try {
    load_checked(f.fd.get(), f.size, want, l);
    l.state = EntryState::Valid;
  } catch (const Error& e) {
    l.reason = e.what();  // a valid entry this process cannot map: compile instead, keep the entry
    l.state = EntryState::Ignored;
  } catch (const std::exception& e) {
    l.reason = e.what();
  }
  return l;
}

KernelPtr make_kernel(const Problem& p, Lookup&& l) {
  auto k = std::make_shared<CompiledKernel>();
  k->problem = p;
  k->plan = std::move(l.entry.plan);
  k->code = std::move(l.code);
  jit_profile_code(k->code->data(), k->code->size(), k->plan.name);
  for (int kind = 0; kind < 2; ++kind)
    for (size_t off : l.entry.entries[kind])
      k->fns[kind].push_back(reinterpret_cast<jit::KernelFn>(
          reinterpret_cast<uintptr_t>(k->code->data() + off)));
  k->schedule = build_schedule(k->plan);
  k->compile_ms = 0;  // served from a cache, as Kernel::compile_ms documents
  return k;
}

// The whole file, for `cache ls/verify`.
struct FileRead {
  FileState state = FileState::Absent;
  std::string reason;
  std::vector<uint8_t> bytes;
};

FileRead read_entry_file(const std::string& path) {
  OpenedFile f = open_entry_file(path);
  FileRead r{f.state, f.reason, {}};
  if (f.state == FileState::Open) {
    r.bytes.resize(static_cast<size_t>(f.size));
    // A read error or a file shrinking under us shows up as a truncated entry.
    if (!pread_all(f.fd.get(), r.bytes.data(), r.bytes.size(), 0)) r.bytes.clear();
  }
  return r;
}

// A name no other thread or process will pick: pid, a per-process random value and a counter.
std::string temp_name(const std::string& dir, const std::string& file) {
  static const uint64_t salt = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  char tail[64];
  std::snprintf(tail, sizeof tail, ".tmp.%ld.%llx.%llu", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(salt), static_cast<unsigned long long>(++counter));
  return dir + "/." + file + tail;
}

// Temporary file, then rename: readers see the old entry, or the new one complete, never a mixture.
// No fsync: it costs ~3 ms per entry on ext4, fifty times the JIT itself, and buys nothing here. An entry
// that had not reached the disk before a crash is missing or fails its size or checksum check, and is
// simply compiled and written again.
void write_entry(const std::string& dir, const std::string& file, const std::vector<uint8_t>& bytes) {
  const std::string tmp = temp_name(dir, file);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot create '" + tmp + "': " + errno_text());
  bool ok = ::fchmod(fd, 0600) == 0 && write_all(fd, bytes.data(), bytes.size());
  std::string why = ok ? "" : errno_text();
  if (::close(fd) != 0 && ok) {
    ok = false;
    why = errno_text();
  }
  if (ok && ::rename(tmp.c_str(), (dir + '/' + file).c_str()) != 0) {
    ok = false;
    why = errno_text();
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write '" + dir + '/' + file + "': " + why);
  }
}

bool dir_vanished(const std::string& dir) {
  struct stat st;
  return ::stat(dir.c_str(), &st) != 0 && errno == ENOENT;
}

void store(const std::string& dir, const std::string& file, const CompiledKernel& k, Isa isa,
           const TuningHints& hints, const std::string& key) {
  const std::vector<uint8_t> bytes = encode_entry(k, isa, hints, key);
  for (int attempt = 0;; ++attempt) {
    try {
      write_entry(dir, file, bytes);
      return;
    } catch (const std::exception& e) {
      // The directory was checked once for this process; if it has been removed since, check (and
      // create) it again, once.
      if (attempt == 0 && dir_vanished(dir)) {
        forget_dir(dir);
        if (dir_usable_cached(dir)) continue;
        return;
      }
      warn_once("write:" + dir, std::string("kernel cache: ") + e.what());
      return;
    }
  }
}

bool is_entry_name(const std::string& n) {
  return n.size() == 20 && n[0] != '.' && n.compare(16, 4, ".djk") == 0;
}
bool is_temp_name(const std::string& n) {
  return n.size() > 1 && n[0] == '.' && n.find(".djk.tmp.") != std::string::npos;
}

std::vector<std::string> dir_names(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    if (errno == ENOENT) return names;
    throw Error(Error::Kind::Io, "cannot read kernel cache directory '" + dir + "': " + errno_text());
  }
  while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

DiskCacheEntry describe_entry(const std::string& dir, const std::string& name) {
  DiskCacheEntry out;
  out.path = dir + '/' + name;
  struct stat st;
  if (::lstat(out.path.c_str(), &st) == 0) out.file_size = static_cast<uint64_t>(st.st_size);
  const FileRead f = read_entry_file(out.path);
  if (f.state != FileState::Open) {
    out.error = (f.state == FileState::Ignored ? "ignored: it " : "unreadable: it ") + f.reason;
    return out;
  }
  try {
    const EntryClaims c = read_claims(f.bytes);
    out.descriptor = c.descriptor;
    out.isa = c.isa;
    out.library_version = c.version;
    out.kernel_name = c.kernel_name;
    out.code_size = c.code_size;
    const EntryExpectation want = expectation_from_claims(c);
    if (entry_file_name(want.key) != name) throw std::runtime_error("file name does not match its key");
    verify_entry(f.bytes, want);
    out.valid = true;
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

}  // namespace

void forget_checked_dirs() {
  CheckedDirs& c = CheckedDirs::instance();
  std::lock_guard<std::mutex> lock(c.mu);
  c.safe.clear();
}

std::string disk_cache_dir(const Options& o) {
  if (!o.use_disk_cache) return "";
  return o.cache_dir ? *o.cache_dir : default_cache_dir();
}

KernelPtr build_or_load(const Problem& p, Isa isa, const Options& o) {
  const std::string dir = disk_cache_dir(o);
  if (dir.empty() || !dir_usable_cached(dir)) return build_kernel(p, make_plan(p, isa, o.hints));
  const EntryExpectation want{p, isa, o.hints, disk_key(p.canonical, isa, o.hints)};
  const std::string file = entry_file_name(want.key);
  Lookup l = lookup_entry(dir + '/' + file, want);
  if (l.state == EntryState::Valid) return make_kernel(p, std::move(l));
  if (verbose() && l.state != EntryState::Absent)
    std::fprintf(stderr, "deconvjit: disk cache entry %s/%s not used: %s\n", dir.c_str(), file.c_str(),
                 l.reason.c_str());
  KernelPtr k = build_kernel(p, make_plan(p, isa, o.hints));
  // Someone else's or an unsafe file is left alone; a missing or rejected one is (re)written.
  if (l.state != EntryState::Ignored) store(dir, file, *k, isa, o.hints, want.key);
  return k;
}

}  // namespace detail

std::string default_cache_dir() {
  if (const char* v = std::getenv("DECONVJIT_CACHE_DIR")) return v;  // set but empty: disabled
  // XDG says a relative XDG_CACHE_HOME is invalid and must be ignored.
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && x[0] == '/') return std::string(x) + "/deconvjit";
  if (const char* h = std::getenv("HOME"); h && h[0] == '/') return std::string(h) + "/.cache/deconvjit";
  return "";
}

DiskCacheLookup disk_cache_lookup(const Descriptor& d, const Options& given) {
  const Problem p = resolve(d);
  const Isa isa = resolve_isa(given.max_isa);
  // The hints compile() would plan with: a tuning record's when there is one.
  detail::PlanSource source(given);
  const Options& options = source.resolve_hints(p, isa);
  // A col kernel has no code of its own: its inner GEMM kernel is the entry.
  const detail::Plan plan = detail::make_plan(p, isa, options.hints);
  if (plan.algorithm == detail::Algorithm::col)
    return disk_cache_lookup(detail::col_inner_descriptor(p), detail::col_inner_options(plan, options));
  DiskCacheLookup out;
  const std::string dir = detail::disk_cache_dir(options);
  if (dir.empty()) {
    out.reason = "the disk cache is disabled";
    return out;
  }
  if (!detail::dir_usable(dir, /*create=*/false)) {
    out.reason = "the cache directory is absent or unsafe";
    return out;
  }
  const std::string key = detail::disk_key(p.canonical, isa, options.hints);
  out.path = dir + '/' + detail::entry_file_name(key);
  const detail::Lookup l = detail::lookup_entry(out.path, {p, isa, options.hints, key});
  out.usable = l.state == detail::EntryState::Valid;
  out.reason = l.state == detail::EntryState::Absent ? "absent" : l.reason;
  return out;
}

std::vector<DiskCacheEntry> disk_cache_entries(const std::string& dir) {
  std::vector<DiskCacheEntry> out;
  // compile() ignores an unsafe directory as a whole, so every entry in it is reported unusable.
  const std::string dir_why = detail::dir_problem(dir, /*create=*/false);
  for (const std::string& name : detail::dir_names(dir)) {
    if (!detail::is_entry_name(name)) continue;
    out.push_back(detail::describe_entry(dir, name));
    if (!dir_why.empty()) {
      out.back().valid = false;
      out.back().error = "ignored: the directory is " + dir_why;
    }
  }
  return out;
}

size_t disk_cache_clear(const std::string& dir) {
  size_t removed = 0;
  for (const std::string& name : detail::dir_names(dir)) {
    if (!detail::is_entry_name(name) && !detail::is_temp_name(name)) continue;
    const std::string path = dir + '/' + name;
    if (::unlink(path.c_str()) == 0) {
      ++removed;
    } else if (errno != ENOENT) {
      throw Error(Error::Kind::Io, "cannot remove '" + path + "': " + detail::errno_text());
    }
  }
  return removed;
}

}  // namespace deconvjit
