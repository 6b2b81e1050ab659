// The problems one `deconvjit bench` run measures: descriptors from the command line and from a JSON Lines
// suite file, optionally re-expressed in the other data layout.
#pragma once

#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::bench {

struct BenchCase {
  std::string name;    // the descriptor's "name", or `origin`
  std::string origin;  // where it came from, for messages: "FILE:LINE" or "DESC 2"
  Descriptor desc;
};

// `descs` as the CLI takes them (inline JSON or @path), then every non-empty line of `suite_file` (if not
// empty) that does not start with '#'. A bad line throws Error naming the file and line.
std::vector<BenchCase> load_cases(const std::vector<std::string>& descs, const std::string& suite_file);

// The cases whose name matches `regex` (searched, as grep does); throws InvalidArgument for a bad regex.
std::vector<BenchCase> filter_cases(std::vector<BenchCase> cases, const std::string& regex);

// The same problem with the data in `format`: src (and a full-rank output_shape) permuted between
// [N, C, spatial...] and [N, spatial..., C]. Weights are untouched: their format is independent.
Descriptor with_data_format(Descriptor d, DataFormat format);

}  // namespace deconvjit::bench
