// The kernel caches keep element types apart: the same shape in f32, bf16 and f16 is three kernels in
// memory and three entries on disk, and each entry loads back (no compile) and still computes its own type.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/tolerance.hpp"
#include "runtime/typed_data.hpp"

namespace deconvjit {
namespace {

namespace fs = std::filesystem;

Descriptor shape(DType t) {
  Descriptor d = descriptor_from_json(R"({"src":[1,6,5,7],"weights":[6,20,3,3],"strides":[2,2]})");
  d.dtype = d.weights_dtype = t;
  return d;
}

void expect_matches_reference(const Kernel& k) {
  const Problem& p = k.problem();
  const verify::TypedOperands ops = verify::typed_operands(p, 3);
  verify::TypedData dst(p.dtype, p.dst_elements());
  k.execute(ops.src.view(), ops.weights.view(), dst.view());
  std::vector<double> want(static_cast<size_t>(p.dst_elements())), mag(want.size());
  reference_with_bound(p, ops.src.view(), ops.weights.view(), want.data(), mag.data());
  const verify::Comparison c = verify::compare(p, dst.view(), want.data(), mag.data(), p.dst_elements());
  EXPECT_TRUE(c.ok) << k.name() << ": " << c.failures << " elements outside the tolerance";
}

TEST(DtypeCaches, EachTypeIsItsOwnKernelInMemoryAndOnDisk) {
  std::string tmpl = (fs::temp_directory_path() / "deconvjit_dtype_XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  Options o;
  o.cache_dir = tmpl;
  o.tuning_db = "";
  cache_clear();
  std::set<std::string> names;
  std::set<const void*> impls;
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    const Kernel k = compile(shape(t), o);
    EXPECT_NE(k.name().find(std::string("_") + to_string(t) + "_"), std::string::npos) << k.name();
    names.insert(k.name());
    impls.insert(k.impl());
    expect_matches_reference(k);
  }
  EXPECT_EQ(names.size(), 3u);
  EXPECT_EQ(impls.size(), 3u);
  const std::vector<DiskCacheEntry> entries = disk_cache_entries(tmpl);
  ASSERT_EQ(entries.size(), 3u);
  std::set<std::string> descriptors;
  for (const DiskCacheEntry& e : entries) {
    EXPECT_TRUE(e.valid) << e.path << ": " << e.error;
    descriptors.insert(e.descriptor);
  }
  EXPECT_EQ(descriptors.size(), 3u);
  // A new process would find them: from disk, without compiling, each still in its own type.
  cache_clear();
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    const Kernel k = compile(shape(t), o);
    EXPECT_EQ(k.compile_ms(), 0.0) << k.name() << " was compiled again instead of loaded";
    EXPECT_EQ(k.problem().dtype, t);
    expect_matches_reference(k);
  }
  cache_clear();
  fs::remove_all(tmpl);
}

}  // namespace
}  // namespace deconvjit
