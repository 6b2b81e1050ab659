// The built-in problem suites must stay loadable: every line a valid, named NCX/OIX descriptor.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit {
namespace {

TEST(Suites, RealworldLinesResolve) {
  std::ifstream in(std::string(DECONVJIT_SOURCE_DIR) + "/tools/suites/realworld.jsonl");
  ASSERT_TRUE(in) << "tools/suites/realworld.jsonl is missing";
  std::set<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    const Descriptor d = descriptor_from_json(line);
    EXPECT_FALSE(d.name.empty()) << line;
    EXPECT_TRUE(names.insert(d.name).second) << "duplicate name " << d.name;
    EXPECT_EQ(d.data_format, DataFormat::NCX) << d.name;
    EXPECT_EQ(d.weights_format, WeightsFormat::OIX) << d.name;
    Problem p;
    ASSERT_NO_THROW(p = resolve(d)) << line;
    if (d.name == "ov_spec_ex1") {
      EXPECT_EQ(p.dst_shape, (std::vector<int64_t>{1, 10, 447, 447}));
    }
    if (d.name == "dla_up_dw256") {
      EXPECT_EQ(p.groups, 256);
    }
  }
  EXPECT_EQ(names.size(), 27u);
}

}  // namespace
}  // namespace deconvjit
