#include "runtime/json_limits.hpp"

#include <algorithm>
#include <set>
#include <vector>

namespace deconvjit::detail {
namespace {

// Thrown from the parser callback to stop at the first violated limit; caught in parse_json only.
struct LimitExceeded {
  std::string message;
};

// nlohmann's messages quote the last token read, which can be a whole megabyte string or number.
std::string short_message(const std::string& what) {
  const size_t cut = what.find("] ");
  return text_excerpt(cut == std::string::npos ? what : what.substr(cut + 2), 200);
}

template <typename Json>
bool parse_bounded(std::string_view text, Json& out, std::string& error, const JsonLimits& limits) {
  struct Object {
    size_t keys = 0;
    std::set<std::string> seen;
  };
  // nlohmann's lexer takes a NUL for the end of the input and would silently ignore what follows.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    error = "NUL byte at offset " + std::to_string(nul);
    out = Json();
    return false;
  }
  std::vector<Object> objects;
  const typename Json::parser_callback_t cb = [&](int depth, typename Json::parse_event_t e, Json& parsed) {
    using Event = typename Json::parse_event_t;
    // `depth` counts the containers around this one: the top-level value starts at 0.
    if ((e == Event::object_start || e == Event::array_start) && depth >= limits.max_depth)
      throw LimitExceeded{"nesting deeper than " + std::to_string(limits.max_depth) + " levels"};
    if (e == Event::object_start) objects.emplace_back();
    if (e == Event::object_end && !objects.empty()) objects.pop_back();
    if (e == Event::key && !objects.empty()) {
      Object& o = objects.back();
      const std::string& key = parsed.template get_ref<const std::string&>();
      if (++o.keys > limits.max_object_keys)
        throw LimitExceeded{"an object with more than " + std::to_string(limits.max_object_keys) + " keys"};
      if (limits.on_key) limits.on_key(key, depth);
      if (limits.reject_duplicate_keys && !o.seen.insert(key).second)
        throw LimitExceeded{"duplicate field '" + text_excerpt(key) + "'"};
    }
    return true;
  };
  try {
    out = Json::parse(text.begin(), text.end(), cb);
    return true;
  } catch (const LimitExceeded& e) {
    error = e.message;
  } catch (const typename Json::out_of_range&) {
    // nlohmann's only out_of_range while parsing: a number beyond double (1e999999, a 400-digit integer).
    error = "number out of range (beyond a 64-bit integer or double)";
  } catch (const typename Json::exception& e) {
    error = short_message(e.what());
  }
  out = Json();
  return false;
}

// A string's JSON text, cut before dump() copies and escapes it; a cut inside a UTF-8 sequence is replaced
// rather than thrown about.
template <typename Json>
std::string quoted(const std::string& str, size_t room) {
  const bool cut = str.size() > room;
  std::string q = Json(cut ? str.substr(0, room) : str).dump(-1, ' ', false, Json::error_handler_t::replace);
  return cut ? q + "..." : q;
}

// Appends v's JSON text to `s` until `s` is longer than `limit`; false once it is. Recursion is bounded by
// parse_json's depth limit for parsed values.
template <typename Json>
bool excerpt_into(const Json& v, std::string& s, size_t limit) {
  if (s.size() > limit) return false;
  const size_t room = limit - s.size() + 1;
  if (v.is_array() || v.is_object()) {
    s += v.is_array() ? '[' : '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) s += ',';
      first = false;
      if (v.is_object()) s += quoted<Json>(it.key(), limit - std::min(limit, s.size()) + 1) + ':';
      if (!excerpt_into(*it, s, limit)) return false;
    }
    s += v.is_array() ? ']' : '}';
  } else if (v.is_string()) {
    s += quoted<Json>(v.template get_ref<const std::string&>(), room);
  } else {
    s += v.dump();
  }
  return s.size() <= limit;
}

template <typename Json>
std::string excerpt(const Json& v, size_t max_chars) {
  std::string s;
  const size_t keep = max_chars > 3 ? max_chars - 3 : 0;
  if (excerpt_into(v, s, max_chars) && s.size() <= max_chars) return s;
  return s.substr(0, keep) + "...";
}

}  // namespace

bool parse_json(std::string_view text, nlohmann::json& out, std::string& error, const JsonLimits& limits) {
  return parse_bounded(text, out, error, limits);
}

bool parse_json(std::string_view text, nlohmann::ordered_json& out, std::string& error,
                const JsonLimits& limits) {
  return parse_bounded(text, out, error, limits);
}

std::string json_excerpt(const nlohmann::json& v, size_t max_chars) { return excerpt(v, max_chars); }
std::string json_excerpt(const nlohmann::ordered_json& v, size_t max_chars) { return excerpt(v, max_chars); }

std::string text_excerpt(std::string_view text, size_t max_chars) {
  if (text.size() <= max_chars) return std::string(text);
  return std::string(text.substr(0, max_chars > 3 ? max_chars - 3 : 0)) + "...";
}

}  // namespace deconvjit::detail
