// deconvjit plans DESC: the plan space an autotuner searches, one JSON line per candidate, best model
// estimate first. Each line's "hints" given to --hints (or Options::hints) build exactly that kernel.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli.hpp"

namespace deconvjit::cli {
namespace {

struct PlansArgs {
  std::string desc, isa = "best";
  int threads = 0;
  size_t limit = 0;
  bool plan = false;
};

int plans(const PlansArgs& a) {
  const Problem p = resolve(load_descriptor(a.desc));
  const Isa isa = resolve_isa(isa_from_string(a.isa));
  const std::vector<PlanCandidate> all = enumerate_plans(p, isa, a.threads);
  size_t shown = 0;
  for (const PlanCandidate& c : all) {
    if (a.limit && shown++ >= a.limit) break;
    nlohmann::ordered_json line;
    line["kernel"] = c.kernel;
    line["hints"] = nlohmann::ordered_json::parse(to_json(c.hints));
    line["model_ms"] = c.model_ms;
    if (a.plan) line["plan"] = nlohmann::ordered_json::parse(plan_json(p, isa, c.hints));
    std::cout << line.dump() << '\n';
  }
  std::cout.flush();
  std::cerr << all.size() << " candidate plans\n";
  return kOk;
}

Action setup_plans(CLI::App& app) {
  auto* sub = app.add_subcommand("plans", "List every candidate plan of a problem (kernel name + hints), "
                                          "ranked by the cost model");
  auto a = std::make_shared<PlansArgs>();
  add_desc_argument(*sub, a->desc);
  add_isa_option(*sub, a->isa);
  sub->add_option("--threads", a->threads, "threads the cost model assumes (0: this machine's)");
  sub->add_option("--limit", a->limit, "print only the first N candidates (0: all)");
  sub->add_flag("--plan", a->plan, "add each candidate's full plan");
  return [a] { return plans(*a); };
}

}  // namespace
}  // namespace deconvjit::cli

DECONVJIT_COMMAND(plans, deconvjit::cli::setup_plans);
