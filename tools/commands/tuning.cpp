// deconvjit tuning ls|verify|clear [--db FILE]: the tuning database that `tune` writes and compile() reads.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli.hpp"

namespace deconvjit::cli {
namespace {

struct TuningArgs {
  std::string action, db;
  bool db_given = false;
};

// Whether compile() on this machine would use the record, and if not, why.
std::string usable(const TuningRecord& r) {
  if (r.cpu != cpu_model_name()) return "made on another CPU (" + r.cpu + ")";
  if (r.version != version()) return "made by deconvjit " + r.version;
  if (!isa_available(r.isa)) return std::string("ISA ") + to_string(r.isa) + " is not available here";
  try {
    Options o;
    o.max_isa = r.isa;
    o.hints = r.hints;
    o.use_cache = o.use_disk_cache = false;
    const Kernel k = compile(descriptor_from_json(r.descriptor), o);
    if (!r.kernel.empty() && k.name() != r.kernel) return "its hints now build " + k.name() + ", not " + r.kernel;
  } catch (const Error& e) {
    return std::string("its hints no longer build: ") + e.what();
  }
  return "";
}

int tuning(const TuningArgs& a) {
  const std::string db = a.db_given ? a.db : default_tuning_db();
  if (db.empty()) throw Error(Error::Kind::InvalidArgument, "no tuning database (DECONVJIT_TUNING_DB is empty)");
  if (a.action == "clear") {
    std::cout << "removed " << tuning_db_clear(db) << " records from " << db << std::endl;
    return kOk;
  }
  std::vector<std::string> errors;
  const std::vector<TuningRecord> records = tuning_db_read(db, &errors);
  int bad = static_cast<int>(errors.size());
  for (const std::string& e : errors) std::cerr << "error: " << db << ": " << e << "\n";
  for (const TuningRecord& r : records) {
    nlohmann::ordered_json j;
    j["name"] = r.name;
    j["isa"] = to_string(r.isa);
    j["threads"] = r.threads;
    j["kernel"] = r.kernel;
    j["speedup"] = r.tuned_ms > 0 ? r.default_ms / r.tuned_ms : 0.0;
    if (a.action == "verify") {
      const std::string why = usable(r);
      j["usable"] = why.empty();
      if (!why.empty()) j["reason"] = why;
      bad += !why.empty() && r.cpu == cpu_model_name() && r.version == version();
    } else {
      j["cpu"] = r.cpu;
      j["version"] = r.version;
      j["descriptor"] = nlohmann::ordered_json::parse(r.descriptor);
    }
    std::cout << j.dump() << '\n';
  }
  std::cout.flush();
  // verify fails on what compile() here would have to ignore although it is this machine's record.
  return a.action == "verify" && bad ? kMismatch : kOk;
}

Action setup_tuning(CLI::App& app) {
  auto* sub = app.add_subcommand("tuning", "List, verify or clear the tuning database");
  auto a = std::make_shared<TuningArgs>();
  sub->add_option("ACTION", a->action, "ls, verify or clear")->required()->check(CLI::IsMember({"ls", "verify", "clear"}));
  sub->add_option("--db", a->db, "the database file (default: DECONVJIT_TUNING_DB or "
                                 "$XDG_CONFIG_HOME/deconvjit/tuning.jsonl)")
      ->each([a](const std::string&) { a->db_given = true; });
  return [a] { return tuning(*a); };
}

}  // namespace
}  // namespace deconvjit::cli

DECONVJIT_COMMAND(tuning, deconvjit::cli::setup_tuning);
