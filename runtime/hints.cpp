#include "runtime/hints.hpp"
#include "runtime/json_limits.hpp"

#include <string>

#include <nlohmann/json.hpp>

namespace deconvjit {
namespace {

struct IntField {
  const char* name;
  int TuningHints::*member;
  int unset;
  bool flag = false;  // an on/off choice: true and false read naturally
};
struct TextField {
  const char* name;
  std::string TuningHints::*member;
};

constexpr TextField kText[] = {
    {"algorithm", &TuningHints::algorithm}, {"layout", &TuningHints::layout}, {"isa", &TuningHints::isa}};
constexpr IntField kInts[] = {
    {"band_rows", &TuningHints::band_rows, -1},
    {"batch_block", &TuningHints::batch_block, -1, true}, {"channels_per_call", &TuningHints::channels_per_call, 0},
    {"edge_blocks", &TuningHints::edge_blocks, -1, true},
    {"flat_plane", &TuningHints::flat_plane, -1, true},   {"fuse_x_taps", &TuningHints::fuse_x_taps, -1, true},
    {"group_inner", &TuningHints::group_inner, -1, true},
    {"ic_block", &TuningHints::ic_block, 0},
    {"ic_pairs", &TuningHints::ic_pairs, -1, true}, {"ic_unroll", &TuningHints::ic_unroll, 0},
    {"nt_stores", &TuningHints::nt_stores, -1, true},      {"oc_chunk", &TuningHints::oc_chunk, 0},
    {"oc_inner", &TuningHints::oc_inner, -1, true},
    {"oc_loop", &TuningHints::oc_loop, 0},          {"oc_vectors", &TuningHints::oc_vectors, 0},
    {"pack_src", &TuningHints::pack_src, -1, true},
    {"parallel", &TuningHints::parallel, -1, true},       {"prefetch_src", &TuningHints::prefetch_src, -1, true},
    {"row_chunk", &TuningHints::row_chunk, 0},
    {"rows_per_block", &TuningHints::rows_per_block, 0}, {"ur_w", &TuningHints::ur_w, 0},
    {"weight_regs", &TuningHints::weight_regs, 0}, {"widen_src", &TuningHints::widen_src, -1, true},
    {"x_halo", &TuningHints::x_halo, -1, true},           {"x_split", &TuningHints::x_split, 0}};

// A new field must join the tables above. This tripwire fires when a field changes the struct's size: any
// string, and an int when the count of ints goes past a multiple of 2 (their padding hides the others).
static_assert(sizeof(TuningHints) == (25 * sizeof(int) + 7) / 8 * 8 + 3 * sizeof(std::string),
              "TuningHints changed: add the new field to the tables in runtime/hints.cpp");

std::string known_fields() {
  std::string s;
  for (const TextField& f : kText) s += std::string(s.empty() ? "" : ", ") + f.name;
  for (const IntField& f : kInts) s += std::string(", ") + f.name;
  return s;
}

[[noreturn]] void reject(const std::string& why) {
  throw Error(Error::Kind::InvalidArgument, "tuning hints: " + why);
}

}  // namespace

bool TuningHints::empty() const {
  for (const TextField& f : kText)
    if (!(this->*f.member).empty()) return false;
  for (const IntField& f : kInts)
    if (this->*f.member != f.unset) return false;
  return true;
}

std::string to_json(const TuningHints& h) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const TextField& f : kText)
    if (!(h.*f.member).empty()) j[f.name] = h.*f.member;
  for (const IntField& f : kInts)
    if (h.*f.member != f.unset) j[f.name] = h.*f.member;
  return j.dump();
}

TuningHints hints_from_json(const std::string& text) {
  nlohmann::json j;
  std::string error;
  if (!detail::parse_json(text, j, error)) reject("not valid JSON (" + error + ")");
  if (!j.is_object()) reject("expected a dict or a JSON object such as {\"ur_w\": 4}");
  TuningHints h;
  for (const auto& [key, v] : j.items()) {
    bool known = false;
    for (const TextField& f : kText)
      if (key == f.name) {
        if (!v.is_string()) reject("'" + key + "' must be a string");
        h.*f.member = v.get<std::string>();
        known = true;
      }
    for (const IntField& f : kInts)
      if (key == f.name) {
        if (v.is_boolean() && f.flag) {
          h.*f.member = v.get<bool>() ? 1 : 0;
        } else {
          if (!v.is_number_integer()) reject("'" + key + "' must be an integer");
          if (v.get<int64_t>() < -1 || v.get<int64_t>() > (1 << 30))
            reject("'" + key + "' = " + v.dump() + " is out of range [-1, 2^30]");
          h.*f.member = static_cast<int>(v.get<int64_t>());
        }
        known = true;
      }
    if (!known) reject("unknown field '" + key.substr(0, 64) + "' (known: " + known_fields() + ")");
  }
  return h;
}

namespace detail {

std::string hints_key_text(const TuningHints& h) {
  std::string s = "{";
  for (const TextField& f : kText) s += '"' + std::string(f.name) + "\":" + nlohmann::json(h.*f.member).dump() + ',';
  for (const IntField& f : kInts) s += '"' + std::string(f.name) + "\":" + std::to_string(h.*f.member) + ',';
  s.back() = '}';
  return s;
}

}  // namespace detail
}  // namespace deconvjit
