// deconvjit warm INPUT...: compiles every descriptor of the inputs ahead of time into the on-disk kernel
// cache, in parallel, so that later processes load the kernels instead of compiling them.
#include <tbb/parallel_for.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <memory>
#include <mutex>
#include <set>

#include "cli.hpp"
#include "import/inputs.hpp"

namespace deconvjit::cli {
namespace {

struct WarmArgs {
  std::vector<std::string> inputs;
  std::string cache, isa = "best";
  int threads = 0;
  bool dry_run = false;
};

enum class Outcome { Compiled, Cached, WouldCompile, Failed };

struct Job {
  std::string label;
  Descriptor descriptor;
  Outcome outcome = Outcome::Failed;
  std::string detail;  // the failure, or for a dry run why it would compile
  std::string canonical;  // the descriptor as the cache keys it: a dry run shows what an input became
};

// One job per distinct problem: a model often repeats a layer shape, and compiling it twice is waste.
std::vector<Job> plan_jobs(const std::vector<import::ImportedLayer>& items, std::vector<Job>& failed,
                           size_t& duplicates) {
  std::vector<Job> jobs;
  std::set<std::string> seen;
  for (const import::ImportedLayer& item : items) {
    if (!item.descriptor) {
      failed.push_back({item.label, {}, Outcome::Failed, item.error, ""});
      continue;
    }
    try {
      std::string canonical = canonical_json(*item.descriptor);
      if (!seen.insert(canonical).second) {
        ++duplicates;
        continue;
      }
      jobs.push_back({item.label, *item.descriptor, Outcome::Failed, "", std::move(canonical)});
    } catch (const std::exception& e) {
      failed.push_back({item.label, {}, Outcome::Failed, e.what(), ""});
    }
  }
  return jobs;
}

void run_job(Job& job, const Options& options, bool dry_run) {
  try {
    const DiskCacheLookup before = disk_cache_lookup(job.descriptor, options);
    if (before.usable) {
      job.outcome = Outcome::Cached;
      return;
    }
    if (dry_run) {
      job.outcome = Outcome::WouldCompile;
      job.detail = before.reason;
      return;
    }
    compile(job.descriptor, options);
    // compile() never fails because of the cache, so ask the cache whether the entry really landed.
    const DiskCacheLookup after = disk_cache_lookup(job.descriptor, options);
    job.outcome = after.usable ? Outcome::Compiled : Outcome::Failed;
    if (!after.usable) job.detail = "compiled, but no usable entry was stored: " + after.reason;
  } catch (const std::exception& e) {
    job.outcome = Outcome::Failed;
    job.detail = e.what();
  }
}

// A single self-overwriting line on a terminal; nothing at all when stderr is a file or a pipe.
class Progress {
 public:
  explicit Progress(size_t total) : total_(total), live_(::isatty(2) == 1) {}
  void step() {
    const size_t done = ++done_;
    if (!live_) return;
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (done != total_ && now - last_ < std::chrono::milliseconds(50)) return;
    last_ = now;
    std::fprintf(stderr, "\r\033[Kwarm: %zu/%zu kernels", done, total_);
    if (done == total_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  size_t total_;
  bool live_;
  std::atomic<size_t> done_{0};
  std::mutex mu_;
  std::chrono::steady_clock::time_point last_{};
};

size_t count(const std::vector<Job>& jobs, Outcome o) {
  size_t n = 0;
  for (const Job& j : jobs) n += j.outcome == o;
  return n;
}

void print_summary(const std::vector<Job>& jobs, const std::vector<Job>& failed, size_t duplicates,
                   const std::string& dir, bool dry_run, double seconds) {
  if (dry_run) {
    for (const Job& j : jobs)
      std::cout << (j.outcome == Outcome::Cached ? "cached   " : j.outcome == Outcome::Failed ? "failed   "
                                                                                                : "compile  ")
                << j.label << (j.detail.empty() ? "" : " (" + j.detail + ")") << "  " << j.canonical << "\n";
  }
  const size_t bad = failed.size() + count(jobs, Outcome::Failed);
  std::cout << (dry_run ? "dry run: " : "warm: ") << jobs.size() << " kernels in " << dir << ": "
            << (dry_run ? count(jobs, Outcome::WouldCompile) : count(jobs, Outcome::Compiled))
            << (dry_run ? " to compile, " : " compiled, ") << count(jobs, Outcome::Cached)
            << " already cached, " << bad << " failed";
  if (duplicates) std::cout << " (" << duplicates << " duplicate descriptors skipped)";
  std::cout << "; " << std::fixed << std::setprecision(3) << seconds << " s\n";
  for (const Job& j : failed) std::cout << "failed: " << j.label << ": " << j.detail << "\n";
  for (const Job& j : jobs)
    if (j.outcome == Outcome::Failed) std::cout << "failed: " << j.label << ": " << j.detail << "\n";
}

int warm(const WarmArgs& a) {
  Options options;
  options.max_isa = resolve_isa(isa_from_string(a.isa));  // an unavailable ISA fails before any work
  options.use_cache = false;  // every kernel goes to disk; keeping them all in memory too is waste
  options.cache_dir = a.cache.empty() ? default_cache_dir() : a.cache;
  if (options.cache_dir->empty())
    throw Error(Error::Kind::InvalidArgument,
                "the disk cache is disabled (DECONVJIT_CACHE_DIR is set but empty): give --cache DIR");

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Job> failed;
  size_t duplicates = 0;
  std::vector<Job> jobs = plan_jobs(import::read_inputs(a.inputs), failed, duplicates);
  Progress progress(jobs.size());
  run_with_threads(a.threads, [&] {
    tbb::parallel_for(size_t{0}, jobs.size(), [&](size_t i) {
      run_job(jobs[i], options, a.dry_run);
      progress.step();
    });
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  print_summary(jobs, failed, duplicates, *options.cache_dir, a.dry_run, seconds);
  const bool any_failed = !failed.empty() || count(jobs, Outcome::Failed) > 0;
  return any_failed ? 1 : kOk;
}

Action setup_warm(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "warm", "Compile every descriptor of the inputs into the on-disk kernel cache (exit 1 if any failed)");
  auto a = std::make_shared<WarmArgs>();
  sub->add_option("INPUT", a->inputs, "JSON Lines descriptor files (.jsonl), OpenVINO IR models (.xml) or ONNX models (.onnx)")
      ->required();
  sub->add_option("--cache", a->cache, "cache directory (default: DECONVJIT_CACHE_DIR or ~/.cache/deconvjit)");
  add_isa_option(*sub, a->isa);
  sub->add_option("--threads", a->threads, "compiler threads (0 = all)")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--dry-run", a->dry_run, "list what would be compiled and what is already cached, with each canonical descriptor");
  return [a] { return warm(*a); };
}

}  // namespace
}  // namespace deconvjit::cli

DECONVJIT_COMMAND(warm, deconvjit::cli::setup_warm);
