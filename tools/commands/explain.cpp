// deconvjit explain DESC: the plan compile() would build, each choice with where it came from: a given
// hint, a tuning record, or the heuristic's rule (runtime/plan_rules.cpp), and the cost model's view.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "runtime/plan.hpp"
#include "runtime/plan_rules.hpp"
#include "runtime/tuning_db.hpp"

namespace deconvjit::cli {
namespace {

struct ExplainArgs {
  std::string desc, isa = "best", hints;
  int threads = 0;
};

int explain(const ExplainArgs& a) {
  const Problem p = resolve(load_descriptor(a.desc));
  Options options;
  options.max_isa = resolve_isa(isa_from_string(a.isa));
  options.hints = load_hints(a.hints);
  nlohmann::ordered_json out;
  run_with_threads(a.threads, [&] {
    detail::PlanSource source(options);
    const TuningHints& given = source.resolve_hints(p, options.max_isa).hints;
    const detail::Plan plan = detail::make_plan(p, options.max_isa, given);
    const nlohmann::json chosen = nlohmann::json::parse(to_json(plan.choices));
    const nlohmann::json asked = nlohmann::json::parse(to_json(given));
    out["kernel"] = plan.name;
    out["source"] = source.why();
    for (const auto& [field, value] : chosen.items()) {
      nlohmann::ordered_json c;
      c["value"] = value;
      if (asked.contains(field))
        c["by"] = source.from_record() ? "tuning record" : "hint";
      else
        c["by"] = "heuristic: " + detail::heuristic_rule(field, plan.choices.algorithm);
      out["choices"][field] = c;
    }
    // Where the cost model ranks this plan among every candidate.
    const std::vector<PlanCandidate> all = enumerate_plans(p, options.max_isa, 0);
    for (size_t i = 0; i < all.size(); ++i)
      if (to_json(all[i].hints) == to_json(plan.choices)) {
        out["model"] = {{"rank", i + 1}, {"of", all.size()}, {"model_ms", all[i].model_ms},
                        {"best_model_ms", all.front().model_ms}, {"best_kernel", all.front().kernel}};
        break;
      }
    out["plan"] = nlohmann::ordered_json::parse(plan.to_json());
  });
  std::cout << out.dump(2) << std::endl;
  return kOk;
}

Action setup_explain(CLI::App& app) {
  auto* sub = app.add_subcommand("explain", "Print the plan with the reason for each choice (hint, tuning "
                                            "record or heuristic rule) and the cost model's ranking");
  auto a = std::make_shared<ExplainArgs>();
  add_desc_argument(*sub, a->desc);
  add_isa_option(*sub, a->isa);
  add_hints_option(*sub, a->hints);
  sub->add_option("--threads", a->threads, "threads the plan is for (tuning records are per thread count)");
  return [a] { return explain(*a); };
}

}  // namespace
}  // namespace deconvjit::cli

DECONVJIT_COMMAND(explain, deconvjit::cli::setup_explain);
