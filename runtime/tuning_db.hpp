// compile()'s view of the tuning database: an in-process copy of each file, read once and dropped when
// this process stores into it, so a lookup costs a map search and no system call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::detail {

// The record for this problem, ISA, thread count, this CPU and this library version, if any.
std::optional<TuningRecord> tuned_record(const std::string& path, const std::string& canonical, Isa isa,
                                         int threads);
// Changes whenever an in-process copy is dropped: part of the kernel cache's fast key.
uint64_t tuning_db_generation();

// Where compile()'s hints come from: the caller's, a tuning record, or none (the heuristic). The record
// is looked up once, on a cache miss; one whose hints no longer build is ignored.
class PlanSource {
 public:
  explicit PlanSource(const Options& o);
  // The kernel cache's fast key must change when the database could give other hints.
  std::string raw_suffix() const;
  // The options to plan with: the caller's, with a usable record's hints in place.
  const Options& resolve_hints(const Problem& p, Isa isa);
  bool looked_up() const { return looked_up_; }
  const std::string& why() const { return why_; }  // "heuristic", "hints given", "tuned record in F", ...
  bool from_record() const { return from_record_; }

 private:
  std::string db_;  // the database consulted ("" = none: hints were given, or it is disabled)
  int threads_ = 1;
  Options options_;
  std::string why_ = "heuristic";
  bool looked_up_ = false, from_record_ = false;
};

}  // namespace deconvjit::detail
