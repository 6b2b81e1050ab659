#include "bench/suite.hpp"

#include <regex>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "cli.hpp"

namespace deconvjit::bench {

std::vector<BenchCase> load_cases(const std::vector<std::string>& descs, const std::string& suite_file) {
  std::vector<BenchCase> cases;
  for (size_t i = 0; i < descs.size(); ++i) {
    Descriptor d = cli::load_descriptor(descs[i]);
    const std::string origin = "DESC " + std::to_string(i + 1);
    cases.push_back({!d.name.empty() ? d.name : origin, origin, std::move(d)});
  }
  if (suite_file.empty()) return cases;
  std::ifstream in(suite_file);
  if (!in) throw Error(Error::Kind::Io, "cannot open suite '" + suite_file + "': " + std::strerror(errno));
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const std::string origin = suite_file + ":" + std::to_string(number);
    try {
      Descriptor d = descriptor_from_json(line);
      cases.push_back({!d.name.empty() ? d.name : origin, origin, std::move(d)});
    } catch (const Error& e) {
      throw Error(e.kind(), origin + ": " + e.what());
    }
  }
  return cases;
}

Descriptor with_data_format(Descriptor d, DataFormat format) {
  if (d.data_format == format) return d;
  auto permute = [format](std::vector<int64_t>& s) {
    if (s.size() < 3) return;  // too short to be a data shape; resolve() will say what is wrong
    if (format == DataFormat::NXC) {
      std::rotate(s.begin() + 1, s.begin() + 2, s.end());  // C moves last
    } else {
      std::rotate(s.begin() + 1, s.end() - 1, s.end());    // C moves second
    }
  };
  permute(d.src);
  if (!d.output_shape.empty() && d.output_shape.size() == d.src.size()) permute(d.output_shape);
  d.data_format = format;
  return d;
}

std::vector<BenchCase> filter_cases(std::vector<BenchCase> cases, const std::string& regex) {
  std::regex filter;
  try {
    filter = std::regex(regex);
  } catch (const std::regex_error& e) {
    throw Error(Error::Kind::InvalidArgument, "--filter '" + regex + "' is not a valid regex: " + e.what());
  }
  std::vector<BenchCase> kept;
  for (BenchCase& c : cases)
    if (std::regex_search(c.name, filter)) kept.push_back(std::move(c));
  return kept;
}

}  // namespace deconvjit::bench
