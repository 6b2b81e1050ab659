// Bounded JSON parsing: every JSON text the project reads (descriptors, suites, cache entries, tuning
// records) goes through here, so no input can nest deep enough to exhaust the stack in whatever walks the
// value afterwards, make an object's key lookups quadratic, or turn an out-of-range number into an
// internal error.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace deconvjit::detail {

struct JsonLimits {
  int max_depth = 64;             // nesting of arrays and objects; the top-level value is depth 1
  size_t max_object_keys = 1024;  // per object: nlohmann's ordered_map looks keys up linearly
  bool reject_duplicate_keys = true;  // nlohmann would silently keep one of them
  // Called for every key as it is read, with the depth of its object (1 = top level); it may throw to stop
  // the parse early (a descriptor rejects its first unknown field without reading the rest).
  std::function<void(const std::string& key, int depth)> on_key;
};

// Parses `text` into `out`. On failure returns false and sets `error` to one short line ("nesting deeper
// than 64", "number out of range: 1e99999...", "syntax error ..."); never throws for bad text. Exceptions
// thrown by `on_key` pass through.
bool parse_json(std::string_view text, nlohmann::json& out, std::string& error, const JsonLimits& limits = {});
bool parse_json(std::string_view text, nlohmann::ordered_json& out, std::string& error,
                const JsonLimits& limits = {});

// At most `max_chars` characters of a value's JSON text, ending in "..." when cut. Never serialises more
// than it shows, so quoting a huge value in an error costs nothing.
std::string json_excerpt(const nlohmann::json& v, size_t max_chars = 60);
std::string json_excerpt(const nlohmann::ordered_json& v, size_t max_chars = 60);

// `text` cut to at most `max_chars` characters with "..." appended when cut, for quoting input in errors.
std::string text_excerpt(std::string_view text, size_t max_chars = 60);

}  // namespace deconvjit::detail
