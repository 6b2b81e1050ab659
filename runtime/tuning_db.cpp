// The tuning database: JSON Lines, one record per line, keyed by descriptor, ISA, threads, CPU and version.
#include "runtime/tuning_db.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>
#include <oneapi/tbb/task_arena.h>

#include "runtime/file_io.hpp"
#include "runtime/json_limits.hpp"
#include "runtime/plan.hpp"

namespace deconvjit {
namespace {

using Json = nlohmann::ordered_json;

std::string record_key(const std::string& descriptor, Isa isa, int threads, const std::string& cpu,
                       const std::string& version) {
  return descriptor + '|' + to_string(isa) + '|' + std::to_string(threads) + '|' + cpu + '|' + version;
}
std::string record_key(const TuningRecord& r) {
  return record_key(r.descriptor, r.isa, r.threads, r.cpu, r.version);
}

std::string record_line(const TuningRecord& r) {
  Json j;
  j["descriptor"] = Json::parse(r.descriptor);
  j["isa"] = to_string(r.isa);
  j["threads"] = r.threads;
  j["cpu"] = r.cpu;
  j["version"] = r.version;
  if (!r.name.empty()) j["name"] = r.name;
  j["hints"] = Json::parse(to_json(r.hints));
  j["kernel"] = r.kernel;
  j["default_kernel"] = r.default_kernel;
  j["tuned_ms"] = r.tuned_ms;
  j["default_ms"] = r.default_ms;
  j["candidates"] = r.candidates;
  return j.dump();
}

TuningRecord parse_record(const std::string& line) {
  Json j;
  std::string error;
  if (!detail::parse_json(line, j, error)) throw Error(Error::Kind::InvalidArgument, error);  // reported by the caller
  TuningRecord r;
  r.descriptor = canonical_json(descriptor_from_json(j.at("descriptor").dump()));
  r.isa = isa_from_string(j.at("isa").get<std::string>());
  r.threads = j.at("threads").get<int>();
  r.cpu = j.at("cpu").get<std::string>();
  r.version = j.at("version").get<std::string>();
  r.name = j.value("name", "");
  r.hints = hints_from_json(j.at("hints").dump());
  r.kernel = j.value("kernel", "");
  r.default_kernel = j.value("default_kernel", "");
  r.tuned_ms = j.value("tuned_ms", 0.0);
  r.default_ms = j.value("default_ms", 0.0);
  r.candidates = j.value("candidates", 0);
  return r;
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

[[noreturn]] void io_error(const std::string& what, const std::string& path) {
  throw Error(Error::Kind::Io, "tuning database: " + what + " '" + path + "': " + std::strerror(errno));
}

// In-process copies of database files, by path.
struct Copies {
  std::mutex mutex;
  std::map<std::string, std::map<std::string, TuningRecord>> files;
  std::atomic<uint64_t> generation{0};
  static Copies& instance() {
    static Copies c;
    return c;
  }
  void drop(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex);
    files.erase(path);
    ++generation;
  }
};

}  // namespace

std::string default_tuning_db() {
  if (const char* v = std::getenv("DECONVJIT_TUNING_DB")) return v;  // set but empty: none
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && x[0] == '/') return std::string(x) + "/deconvjit/tuning.jsonl";
  if (const char* h = std::getenv("HOME"); h && h[0] == '/') return std::string(h) + "/.config/deconvjit/tuning.jsonl";
  return "";
}

std::string cpu_model_name() {
  static const std::string name = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
        std::string v = line.substr(line.find(':') + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
    return std::string("unknown");
  }();
  return name;
}

TuningRecord make_tuning_record(const Problem& p, Isa isa, int threads) {
  TuningRecord r;
  r.descriptor = p.canonical;
  r.isa = resolve_isa(isa);
  r.threads = threads;
  r.cpu = cpu_model_name();
  r.version = version();
  return r;
}

std::vector<TuningRecord> tuning_db_read(const std::string& path, std::vector<std::string>* errors) {
  std::vector<TuningRecord> out;
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return out;
    io_error("cannot read", path);
  }
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      out.push_back(parse_record(line));
    } catch (const std::exception& e) {
      if (errors) errors->push_back("line " + std::to_string(n) + ": " + std::string(e.what()).substr(0, 200));
    }
  }
  return out;
}

void tuning_db_store(const std::string& path, const TuningRecord& r) {
  if (path.empty()) throw Error(Error::Kind::InvalidArgument, "tuning database: no path (it is disabled)");
  const std::string dir = parent_dir(path);
  if (!detail::make_dirs(dir)) io_error("cannot create the directory of", path);
  // The lock is a file of its own: the database itself is replaced by rename, and a lock on a replaced
  // file would guard nothing.
  const std::string lock_path = path + ".lock";
  detail::FileDescriptor lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (lock.get() < 0) io_error("cannot open the lock file", lock_path);
  while (::flock(lock.get(), LOCK_EX) != 0)
    if (errno != EINTR) io_error("cannot lock", lock_path);
  std::vector<TuningRecord> records = tuning_db_read(path);
  std::string text;
  bool replaced = false;
  for (const TuningRecord& old : records) {
    const bool same = record_key(old) == record_key(r);
    text += (same ? record_line(r) : record_line(old)) + '\n';
    replaced = replaced || same;
  }
  if (!replaced) text += record_line(r) + '\n';
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  detail::FileDescriptor out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (out.get() < 0) io_error("cannot write", tmp);
  const bool ok = detail::write_all(out.get(), text.data(), text.size()) && ::fsync(out.get()) == 0;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    io_error("cannot replace", path);
  }
  Copies::instance().drop(path);
}

size_t tuning_db_clear(const std::string& path) {
  const size_t n = tuning_db_read(path).size();
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) io_error("cannot remove", path);
  ::unlink((path + ".lock").c_str());
  Copies::instance().drop(path);
  return n;
}

namespace detail {

std::optional<TuningRecord> tuned_record(const std::string& path, const std::string& canonical, Isa isa,
                                         int threads) {
  Copies& c = Copies::instance();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.files.find(path);
  if (it == c.files.end()) {
    std::map<std::string, TuningRecord> by_key;
    try {
      for (TuningRecord& r : tuning_db_read(path)) by_key[record_key(r)] = std::move(r);
    } catch (const Error&) {
      // An unreadable database is no database: compile() plans by the heuristic, as without one.
    }
    it = c.files.emplace(path, std::move(by_key)).first;
  }
  const auto found = it->second.find(record_key(canonical, isa, threads, cpu_model_name(), version()));
  if (found == it->second.end()) return std::nullopt;
  return found->second;
}

uint64_t tuning_db_generation() { return Copies::instance().generation.load(); }

PlanSource::PlanSource(const Options& o) : options_(o) {
  if (o.hints.empty()) db_ = o.tuning_db ? *o.tuning_db : default_tuning_db();
  if (!o.hints.empty()) why_ = "hints given";
  threads_ = tbb::this_task_arena::max_concurrency();
}

std::string PlanSource::raw_suffix() const {
  if (db_.empty()) return "";
  return '|' + db_ + '#' + std::to_string(tuning_db_generation()) + '#' + std::to_string(threads_);
}

const Options& PlanSource::resolve_hints(const Problem& p, Isa isa) {
  if (looked_up_ || db_.empty()) return options_;
  looked_up_ = true;
  const std::optional<TuningRecord> r = tuned_record(db_, p.canonical, isa, threads_);
  if (!r) return options_;
  try {
    make_plan(p, isa, r->hints);
    options_.hints = r->hints;
    why_ = "tuned record in " + db_;
    from_record_ = true;
  } catch (const Error& e) {
    why_ = "heuristic (tuning record in " + db_ + " ignored: " + e.what() + ")";
  }
  return options_;
}

}  // namespace detail
}  // namespace deconvjit
