// Descriptor <-> JSON. Parsing is strict: a typo or a wrong type must never fall back to a default.
#include "runtime/descriptor.hpp"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "runtime/json_limits.hpp"
#include "runtime/problem.hpp"

#ifndef DECONVJIT_VERSION
#error "DECONVJIT_VERSION must be defined by the build (see CMakeLists.txt)"
#endif

namespace deconvjit {

const char* version() { return DECONVJIT_VERSION; }

const char* to_string(DataFormat f) { return f == DataFormat::NCX ? "NCX" : "NXC"; }

const char* to_string(WeightsFormat f) {
  switch (f) {
    case WeightsFormat::OIX: return "OIX";
    case WeightsFormat::XIO: return "XIO";
    case WeightsFormat::GOIX: return "GOIX";
  }
  return "?";
}

const char* to_string(AutoPad a) {
  switch (a) {
    case AutoPad::Explicit: return "explicit";
    case AutoPad::Valid: return "valid";
    case AutoPad::SameUpper: return "same_upper";
    case AutoPad::SameLower: return "same_lower";
  }
  return "?";
}

const char* to_string(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
  }
  return "?";
}

namespace {

// ordered_json keeps document order: the canonical key order is fixed, and parse errors are reported for
// the first offending field as written.
using json = nlohmann::ordered_json;
using detail::invalid;
using detail::json_excerpt;
using detail::JsonLimits;
using detail::parse_json;
using detail::text_excerpt;

const std::vector<std::string>& known_fields() {
  static const std::vector<std::string> f = {
      "src",      "weights",      "strides",   "dilations", "pads_begin",     "pads_end", "output_padding",
      "auto_pad", "output_shape", "dst_shape", "groups",    "data_format",    "weights_format", "dtype",
      "accumulation", "name"};
  return f;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// " (did you mean 'x'?)" for the closest candidate within a third of the word, or "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  if (word.size() > 64) return "";  // no field name is that long, and edit_distance is quadratic
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(lower(word), c);
    if (d < best_d) best = c, best_d = d;
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

std::string shown(const json& v) { return json_excerpt(v, 60); }

int64_t integer(const json& v, const std::string& where) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    invalid(where + " = " + shown(v) + " is out of the 64-bit integer range");
  if (!v.is_number_integer()) invalid(where + " must be an integer, got " + shown(v));
  return v.get<int64_t>();
}

std::vector<int64_t> int_list(const json& v, const std::string& field) {
  if (!v.is_array()) invalid(field + " must be an array of integers, got " + shown(v));
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(integer(v[i], field + "[" + std::to_string(i) + "]"));
  return out;
}

std::string text(const json& v, const std::string& field) {
  if (!v.is_string()) invalid(field + " must be a string, got " + shown(v));
  return v.get<std::string>();
}

AutoPad parse_auto_pad(const json& v) {
  const std::string s = lower(text(v, "auto_pad"));
  if (s == "explicit" || s == "notset" || s == "none") return AutoPad::Explicit;
  if (s == "valid") return AutoPad::Valid;
  if (s == "same_upper") return AutoPad::SameUpper;
  if (s == "same_lower") return AutoPad::SameLower;
  invalid("auto_pad: unknown value '" + text_excerpt(v.get<std::string>()) +
          "', expected explicit (or notset, none), valid, same_upper or same_lower" +
          did_you_mean(s, {"explicit", "notset", "none", "valid", "same_upper", "same_lower"}));
}

DataFormat parse_data_format(const json& v) {
  const std::string s = lower(text(v, "data_format"));
  if (s == "ncx") return DataFormat::NCX;
  if (s == "nxc") return DataFormat::NXC;
  invalid("data_format: unknown value '" + text_excerpt(v.get<std::string>()) + "', expected NCX or NXC");
}

WeightsFormat parse_weights_format(const json& v) {
  const std::string s = lower(text(v, "weights_format"));
  if (s == "oix") return WeightsFormat::OIX;
  if (s == "xio") return WeightsFormat::XIO;
  if (s == "goix") return WeightsFormat::GOIX;
  invalid("weights_format: unknown value '" + text_excerpt(v.get<std::string>()) + "', expected OIX, XIO or GOIX");
}

DType parse_dtype_name(const json& v, const std::string& where) {
  const std::string s = lower(text(v, where));
  if (s == "f32") return DType::f32;
  if (s == "bf16") return DType::bf16;
  if (s == "f16") return DType::f16;
  invalid(where + ": unknown value '" + text_excerpt(v.get<std::string>()) + "', expected f32, bf16 or f16");
}

void parse_dtype(const json& v, Descriptor& d) {
  if (v.is_string()) {
    d.dtype = d.weights_dtype = parse_dtype_name(v, "dtype");
    return;
  }
  if (!v.is_array() || v.size() != 2)
    invalid("dtype must be a string or an array [data_dtype, weights_dtype], got " + shown(v));
  d.dtype = parse_dtype_name(v[0], "dtype[0]");
  d.weights_dtype = parse_dtype_name(v[1], "dtype[1]");
}

// Parses with the shared limits (runtime/json_limits.hpp), rejecting repeated keys (which nlohmann would
// silently collapse) and stopping at the first unknown field, before the rest of the text is read.
json parse_text(const std::string& text_in) {
  JsonLimits limits;
  limits.on_key = [](const std::string& key, int depth) {
    if (depth == 1 && std::find(known_fields().begin(), known_fields().end(), key) == known_fields().end())
      invalid("unknown field '" + text_excerpt(key) + "'" + did_you_mean(key, known_fields()));
  };
  json j;
  std::string error;
  if (!parse_json(text_in, j, error, limits)) invalid("malformed JSON: " + error);
  return j;
}

void parse_field(const std::string& key, const json& v, Descriptor& d) {
  if (key == "src") d.src = int_list(v, key);
  else if (key == "weights") d.weights = int_list(v, key);
  else if (key == "strides") d.strides = int_list(v, key);
  else if (key == "dilations") d.dilations = int_list(v, key);
  else if (key == "pads_begin") d.pads_begin = int_list(v, key);
  else if (key == "pads_end") d.pads_end = int_list(v, key);
  else if (key == "output_padding") d.output_padding = int_list(v, key);
  else if (key == "output_shape" || key == "dst_shape") d.output_shape = int_list(v, key);
  else if (key == "auto_pad") d.auto_pad = parse_auto_pad(v);
  else if (key == "groups") d.groups = integer(v, key);
  else if (key == "data_format") d.data_format = parse_data_format(v);
  else if (key == "weights_format") d.weights_format = parse_weights_format(v);
  else if (key == "dtype") parse_dtype(v, d);
  // Any type name parses, so a C++ descriptor survives to_json; resolve() judges which pairs are valid.
  else if (key == "accumulation") d.accumulation = parse_dtype_name(v, "accumulation");
  else if (key == "name") d.name = text(v, key);
  else invalid("unknown field '" + text_excerpt(key) + "'" + did_you_mean(key, known_fields()));
}

// Lists the user may omit, filled to the spatial rank when the rank is known (otherwise left for
// resolve() to report).
std::vector<int64_t> filled(const std::vector<int64_t>& v, int64_t fill, size_t rank) {
  if (!v.empty() || rank < 3) return v;
  return std::vector<int64_t>(rank - 2, fill);
}

json dtype_json(DType data, DType weights) {
  if (data == weights) return to_string(data);
  return json::array({to_string(data), to_string(weights)});
}

}  // namespace

Descriptor descriptor_from_json(const std::string& json_text) {
  const json j = parse_text(json_text);
  if (!j.is_object()) invalid("descriptor must be a JSON object, got " + shown(j));
  if (j.contains("output_shape") && j.contains("dst_shape"))
    invalid("output_shape and dst_shape are aliases: give only one of them");
  Descriptor d;
  for (const auto& [key, value] : j.items()) parse_field(key, value, d);
  for (const char* required : {"src", "weights"})
    if (!j.contains(required)) invalid(std::string("missing required field '") + required + "'");
  return d;
}

std::string to_json(const Descriptor& d) {
  const size_t r = d.src.size();
  json j;
  if (!d.name.empty()) j["name"] = d.name;
  j["src"] = d.src;
  j["weights"] = d.weights;
  j["strides"] = filled(d.strides, 1, r);
  j["dilations"] = filled(d.dilations, 1, r);
  j["pads_begin"] = filled(d.pads_begin, 0, r);
  j["pads_end"] = filled(d.pads_end, 0, r);
  j["output_padding"] = filled(d.output_padding, 0, r);
  j["auto_pad"] = to_string(d.auto_pad);
  if (!d.output_shape.empty()) j["output_shape"] = d.output_shape;
  const bool group = detail::is_group_form(d) && !d.weights.empty();
  j["groups"] = d.groups ? *d.groups : group ? d.weights[0] : 1;
  j["data_format"] = to_string(d.data_format);
  j["weights_format"] = to_string(d.weights_format);
  j["dtype"] = dtype_json(d.dtype, d.weights_dtype);
  // Only when not the default: descriptors written before the field existed keep their text.
  if (d.accumulation != DType::f32) j["accumulation"] = to_string(d.accumulation);
  return j.dump();
}

std::string canonical_json(const Descriptor& d) { return resolve(d).canonical; }

namespace detail {

std::string canonical_text(const Problem& p, AutoPad auto_pad, bool has_output_shape) {
  const bool explicit_pads = auto_pad == AutoPad::Explicit;
  const std::vector<int64_t> zeros(p.in.size(), 0);
  json j;
  j["src"] = p.src_shape;
  j["weights"] = p.weights_shape;
  j["strides"] = p.stride;
  j["dilations"] = p.dilation;
  j["pads_begin"] = explicit_pads ? p.pads_begin : zeros;
  j["pads_end"] = explicit_pads ? p.pads_end : zeros;
  j["output_padding"] = p.output_padding;
  j["auto_pad"] = to_string(auto_pad);
  if (has_output_shape) j["output_shape"] = p.out;
  j["groups"] = p.groups;
  j["data_format"] = to_string(p.data_format);
  j["weights_format"] = to_string(p.weights_format);
  j["dtype"] = to_string(p.dtype);
  // Omitted at the default so every canonical key (disk cache, tuning records) made before stays valid.
  if (p.accumulation != DType::f32) j["accumulation"] = to_string(p.accumulation);
  return j.dump();
}

}  // namespace detail
}  // namespace deconvjit
