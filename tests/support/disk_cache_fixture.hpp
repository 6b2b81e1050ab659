// The on-disk kernel cache tests (test_disk_cache*.cpp): a fixture with a private cache directory per test,
// one problem compiled into it, and raw access to its entry files.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/tolerance.hpp"

namespace deconvjit::testing {

using Bytes = std::vector<uint8_t>;

inline Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Decodes an intact entry, lets `edit` change what it holds, and encodes it again with valid checksums:
// the entry is intact, only its claims changed.
inline Bytes edit_parts(const Bytes& b, const std::function<void(detail::EntryParts&)>& edit) {
  detail::EntryParts parts = detail::decode_entry(b);
  edit(parts);
  return detail::encode_parts(parts);
}

inline mode_t mode_of(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

// C_OUT 20 gives a channel tail on both ISAs, so both block kinds of the code are exercised.
inline Descriptor problem() {
  return descriptor_from_json(R"({"src":[2,6,5,7],"weights":[6,20,3,3],"strides":[2,2],"pads_begin":[1,0],)"
                              R"("pads_end":[0,1]})");
}

inline std::vector<float> run(const Kernel& k, uint64_t seed = 7) {
  const verify::Operands ops = verify::random_operands(k.problem(), seed);
  std::vector<float> dst(static_cast<size_t>(k.problem().dst_elements()));
  k.execute(ops.src, ops.weights, dst);
  return dst;
}

class DiskCache : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "deconvjit_disk_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/cache";  // created by the library
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::permissions(dir_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(root_, ec);
  }

  Options options() const {
    Options o;
    o.use_cache = false;  // the in-memory cache would hide the disk
    o.cache_dir = dir_;
    return o;
  }
  Kernel compile_here() const { return compile(problem(), options()); }
  std::string entry_path() const { return disk_cache_lookup(problem(), options()).path; }
  std::vector<float> expected() const {
    Options o = options();
    o.use_disk_cache = false;
    return run(compile(problem(), o));
  }

  std::string root_, dir_;
};

}  // namespace deconvjit::testing
