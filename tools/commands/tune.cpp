// deconvjit tune DESC...|--suite F: searches each problem's plan space (tools/tune/tuner.*), prints the
// winner against the heuristic's plan, and records it in the tuning database compile() consults.
#include <unistd.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include <oneapi/tbb/task_arena.h>

#include "bench/suite.hpp"
#include "cli.hpp"
#include "tune/tuner.hpp"

namespace deconvjit::cli {
namespace {

struct TuneArgs {
  std::vector<std::string> descs;
  std::string suite, isa = "best", filter, db;
  bool db_given = false, json = false, no_store = false;
  int threads = 0;
  double budget = 20;
};

std::vector<bench::BenchCase> tune_cases(const TuneArgs& a) {
  if (a.descs.empty() && a.suite.empty()) throw Error(Error::Kind::InvalidArgument, "tune needs a DESC or --suite FILE");
  return bench::filter_cases(bench::load_cases(a.descs, a.suite), a.filter);
}

// A progress bar on a terminal; plain lines (one per problem) otherwise.
struct Progress {
  bool tty = ::isatty(2);
  size_t total = 0, done = 0;
  std::string name;
  void step(const std::string& what) const {
    if (!tty) return;
    const int width = 24, filled = static_cast<int>(width * done / std::max<size_t>(total, 1));
    std::cerr << "\r\033[K[" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << done + 1 << '/'
              << total << ' ' << name << ": " << what << std::flush;
  }
};

nlohmann::ordered_json result_json(const tune::TuneResult& r) {
  nlohmann::ordered_json j;
  j["name"] = r.name;
  j["kernel"] = r.kernel;
  j["hints"] = nlohmann::ordered_json::parse(to_json(r.hints));
  j["default_kernel"] = r.default_kernel;
  j["default_ms"] = r.default_ms;
  j["tuned_ms"] = r.tuned_ms;
  j["speedup"] = r.default_ms / r.tuned_ms;
  j["candidates"] = r.candidates;
  j["space"] = r.space;
  j["space_complete"] = r.space_complete;
  j["rejected"] = r.rejected;
  j["seconds"] = r.seconds;
  return j;
}

int tune_all(const TuneArgs& a) {
  if (!(a.budget > 0)) throw Error(Error::Kind::InvalidArgument, "--budget must be positive");
  const std::vector<bench::BenchCase> cases = tune_cases(a);
  Options options;
  options.max_isa = resolve_isa(isa_from_string(a.isa));
  const std::string db = a.db_given ? a.db : default_tuning_db();
  Progress progress;
  progress.total = cases.size();
  double log_sum = 0;
  int rejected = 0;
  run_timed(a.threads, [&] {
    const int threads = tbb::this_task_arena::max_concurrency();
    for (const auto& c : cases) {
      progress.name = c.name;
      const tune::TuneResult r =
          tune::tune_problem(c.name, c.desc, options, a.budget, [&](const std::string& w) { progress.step(w); });
      ++progress.done;
      log_sum += std::log(r.default_ms / r.tuned_ms);
      rejected += r.rejected;
      if (!a.no_store && !db.empty()) {
        TuningRecord rec = make_tuning_record(resolve(c.desc), options.max_isa, threads);
        rec.name = c.name;
        rec.hints = r.hints;
        rec.kernel = r.kernel;
        rec.default_kernel = r.default_kernel;
        rec.tuned_ms = r.tuned_ms;
        rec.default_ms = r.default_ms;
        rec.candidates = r.candidates;
        tuning_db_store(db, rec);
      }
      if (progress.tty) std::cerr << "\r\033[K";
      if (a.json) {
        std::cout << result_json(r).dump() << std::endl;
      } else {
        std::printf("%-28s %8.4f ms -> %8.4f ms  x%.3f  %s  (%d of %d plans timed%s, %.1f s)\n", r.name.c_str(),
                    r.default_ms, r.tuned_ms, r.default_ms / r.tuned_ms, r.kernel.c_str(), r.candidates, r.space,
                    r.space_complete ? "" : "; enumeration cut at a quarter of the budget", r.seconds);
        std::fflush(stdout);
      }
    }
  });
  if (!a.json && !cases.empty())
    std::printf("geomean speedup over the heuristic: %.3f over %zu problems%s\n",
                std::exp(log_sum / static_cast<double>(cases.size())), cases.size(),
                a.no_store || db.empty() ? "" : ("; recorded in " + db).c_str());
  if (rejected) std::cerr << "error: " << rejected << " candidate plans disagreed with the reference\n";
  return rejected ? kMismatch : kOk;
}

Action setup_tune(CLI::App& app) {
  auto* sub = app.add_subcommand("tune", "Search each problem's plans, time the best against the heuristic, "
                                         "and record the winner in the tuning database");
  auto a = std::make_shared<TuneArgs>();
  sub->add_option("DESC", a->descs, "problem descriptors: JSON objects, or @path");
  sub->add_option("--suite", a->suite, "JSON Lines file of descriptors (e.g. tools/suites/corpus.jsonl)");
  sub->add_option("--filter", a->filter, "only problems whose name matches this regex");
  add_isa_option(*sub, a->isa);
  sub->add_option("--threads", a->threads, "threads (0: all); records are kept per thread count");
  sub->add_option("--budget", a->budget, "seconds per problem")->capture_default_str();
  sub->add_option("--db", a->db, "tuning database file (default: DECONVJIT_TUNING_DB or "
                                 "$XDG_CONFIG_HOME/deconvjit/tuning.jsonl)")
      ->each([a](const std::string&) { a->db_given = true; });
  sub->add_flag("--no-store", a->no_store, "do not write the database");
  sub->add_flag("--json", a->json, "one JSON object per problem");
  return [a] { return tune_all(*a); };
}

}  // namespace
}  // namespace deconvjit::cli

DECONVJIT_COMMAND(tune, deconvjit::cli::setup_tune);
