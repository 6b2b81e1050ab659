// The built-in problem suites must stay loadable: every line a valid, named NCX/OIX descriptor.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit {
namespace {

std::vector<Descriptor> load_suite(const std::string& file) {
  std::ifstream in(std::string(DECONVJIT_SOURCE_DIR) + "/tools/suites/" + file);
  EXPECT_TRUE(in) << "tools/suites/" << file << " is missing";
  std::vector<Descriptor> out;
  std::string line;
  while (std::getline(in, line)) {
    try {
      out.push_back(descriptor_from_json(line));
    } catch (const Error& e) {
      ADD_FAILURE() << file << ": " << e.what() << "\n" << line;
    }
  }
  return out;
}

// Every descriptor named, names unique, NCX/OIX (the suites are read by tools that assume it), and valid.
void expect_well_formed(const std::vector<Descriptor>& suite) {
  std::set<std::string> names;
  for (const Descriptor& d : suite) {
    EXPECT_FALSE(d.name.empty()) << to_json(d);
    EXPECT_TRUE(names.insert(d.name).second) << "duplicate name " << d.name;
    EXPECT_EQ(d.data_format, DataFormat::NCX) << d.name;
    EXPECT_EQ(d.weights_format, WeightsFormat::OIX) << d.name;
    EXPECT_NO_THROW(resolve(d)) << to_json(d);
  }
}

TEST(Suites, RealworldLinesResolve) {
  const std::vector<Descriptor> suite = load_suite("realworld.jsonl");
  expect_well_formed(suite);
  for (const Descriptor& d : suite) {
    if (d.name == "ov_spec_ex1") {
      EXPECT_EQ(resolve(d).dst_shape, (std::vector<int64_t>{1, 10, 447, 447}));
    }
    if (d.name == "dla_up_dw256") {
      EXPECT_EQ(resolve(d).groups, 256);
    }
  }
  EXPECT_EQ(suite.size(), 27u);
}

// The corpus is the training set of the heuristic and realworld.jsonl its held-out set, so no problem may
// be in both; a problem twice in the corpus would weigh double in every geomean.
TEST(Suites, CorpusLinesResolveAndStayDisjointFromRealworld) {
  const std::vector<Descriptor> corpus = load_suite("corpus.jsonl");
  expect_well_formed(corpus);
  EXPECT_GE(corpus.size(), 150u);
  std::map<std::string, std::string> held_out;  // canonical -> name
  for (const Descriptor& d : load_suite("realworld.jsonl")) held_out[canonical_json(d)] = d.name;
  std::map<std::string, std::string> seen;
  for (const Descriptor& d : corpus) {
    const std::string canonical = canonical_json(d);
    const auto in_realworld = held_out.find(canonical);
    EXPECT_TRUE(in_realworld == held_out.end()) << d.name << " is realworld's " << in_realworld->second;
    const auto [earlier, fresh] = seen.emplace(canonical, d.name);
    EXPECT_TRUE(fresh) << d.name << " is the same problem as " << earlier->second;
  }
}

// Some layers exist to cover a specific shape class; if an edit loses them, the corpus no longer does.
TEST(Suites, CorpusCoversRanksGroupsDilationsAndBatches) {
  std::set<int> ranks;
  bool grouped = false, depthwise = false, dilated = false, batched = false, one_channel = false;
  for (const Descriptor& d : load_suite("corpus.jsonl")) {
    const Problem p = resolve(d);
    ranks.insert(p.spatial_rank);
    grouped |= p.groups > 1 && p.groups < p.c_in;
    depthwise |= p.groups > 1 && p.groups == p.c_in && p.groups == p.c_out;
    for (int64_t v : p.dilation) dilated |= v > 1;
    batched |= p.batch > 1;
    one_channel |= p.c_out == 1 || p.c_in == 1;
  }
  EXPECT_EQ(ranks, (std::set<int>{1, 2, 3}));
  EXPECT_TRUE(grouped);
  EXPECT_TRUE(depthwise);
  EXPECT_TRUE(dilated);
  EXPECT_TRUE(batched);
  EXPECT_TRUE(one_channel);
}

}  // namespace
}  // namespace deconvjit
