// Executable memory: W^X (generated code lives in read+execute pages, never writable and executable at
// once, not even while kernels are being compiled), released once no handle and no cache entry holds it,
// and the bytes are deterministic and position independent (compiling twice gives the same bytes at two
// addresses). Linux only: reads /proc/self/maps.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "support/deconv_tester.hpp"

namespace deconvjit {
namespace {

using testing::DeconvTester;

struct Mapping {
  uintptr_t begin = 0, end = 0;
  std::string perms, path;
  bool readable() const { return perms.size() >= 3 && perms[0] == 'r'; }
  bool writable() const { return perms.size() >= 3 && perms[1] == 'w'; }
  bool executable() const { return perms.size() >= 3 && perms[2] == 'x'; }
  std::string text() const {
    std::ostringstream os;
    os << std::hex << begin << "-" << end << " " << perms << " " << path;
    return os.str();
  }
};

std::vector<Mapping> read_maps() {
  std::vector<Mapping> maps;
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string range, offset, dev, inode;
    Mapping m;
    ls >> range >> m.perms >> offset >> dev >> inode;
    std::getline(ls >> std::ws, m.path);
    const size_t dash = range.find('-');
    if (dash == std::string::npos) continue;
    m.begin = std::stoull(range.substr(0, dash), nullptr, 16);
    m.end = std::stoull(range.substr(dash + 1), nullptr, 16);
    maps.push_back(m);
  }
  return maps;
}

// The mapping containing `addr`, if any.
const Mapping* find_mapping(const std::vector<Mapping>& maps, const void* addr) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  for (const Mapping& m : maps)
    if (a >= m.begin && a < m.end) return &m;
  return nullptr;
}

// Anonymous mappings that are writable and executable: what a JIT without W^X leaves behind. (File-backed
// ones would belong to some library's own odd segments, not to us.)
std::vector<Mapping> anonymous_wx(const std::vector<Mapping>& maps) {
  std::vector<Mapping> out;
  for (const Mapping& m : maps)
    if (m.writable() && m.executable() && (m.path.empty() || m.path[0] == '[')) out.push_back(m);
  return out;
}

Options no_caches(Isa isa = Isa::best) {
  Options o;
  o.max_isa = isa;
  o.use_cache = false;
  o.use_disk_cache = false;
  return o;
}

Descriptor problem(int i) {
  return DeconvTester().channels(4 + i % 5, 8 + i).input({5, 6}).kernel({3, 2}).stride({2, 1 + i % 3})
      .layout(i % 2 ? DataFormat::NXC : DataFormat::NCX).descriptor();
}

class CodeMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::ifstream("/proc/self/maps")) GTEST_SKIP() << "no /proc/self/maps";
    cache_clear();
  }
  void TearDown() override { cache_clear(); }
};

TEST_F(CodeMemory, CodeIsReadExecuteNeverWritable) {
  std::vector<Kernel> kernels;
  for (Isa isa : {Isa::avx512_core, Isa::avx2}) {
    if (!isa_available(isa)) continue;
    for (int i = 0; i < 4; ++i) kernels.push_back(compile(problem(i), no_caches(isa)));
  }
  ASSERT_FALSE(kernels.empty());
  const std::vector<Mapping> maps = read_maps();
  for (const Kernel& k : kernels) {
    ASSERT_GT(k.code_size(), 0u);
    const Mapping* m = find_mapping(maps, k.code());
    ASSERT_NE(m, nullptr) << "no mapping holds the code of " << k.name();
    EXPECT_TRUE(m->readable() && m->executable()) << m->text();
    EXPECT_FALSE(m->writable()) << "code of " << k.name() << " is writable: " << m->text();
    // The whole code lies in that mapping (or in adjacent ones with the same permissions).
    const Mapping* last = find_mapping(maps, k.code() + k.code_size() - 1);
    ASSERT_NE(last, nullptr);
    EXPECT_EQ(last->perms, m->perms) << last->text();
  }
  for (const Mapping& m : anonymous_wx(maps)) ADD_FAILURE() << "writable and executable: " << m.text();
}

// A second thread watches /proc/self/maps while the main thread compiles: no moment shows W+X memory.
TEST_F(CodeMemory, NeverWritableAndExecutableWhileCompiling) {
  std::atomic<bool> done{false};
  std::atomic<int> snapshots{0};
  std::vector<std::string> seen;  // written by the watcher only, read after join
  std::thread watcher([&] {
    while (!done.load()) {
      for (const Mapping& m : anonymous_wx(read_maps()))
        if (seen.size() < 8) seen.push_back(m.text());
      ++snapshots;
    }
  });
  std::vector<Kernel> keep;  // half are kept, half released at once: both mapping and unmapping happen
  for (int i = 0; i < 150; ++i) {
    Kernel k = compile(problem(i % 40), no_caches(i % 2 ? Isa::avx2 : Isa::best));
    if (i % 2) keep.push_back(k);
    while (snapshots.load() < i / 10) std::this_thread::yield();  // interleave with the watcher
  }
  done = true;
  watcher.join();
  EXPECT_GT(snapshots.load(), 10);
  for (const std::string& s : seen) ADD_FAILURE() << "writable and executable mapping seen: " << s;
}

bool executable_at(const void* addr) {
  const std::vector<Mapping> maps = read_maps();
  const Mapping* m = find_mapping(maps, addr);
  return m && m->executable();
}

TEST_F(CodeMemory, ReleasedWhenNoHandleAndNoCacheEntryHoldsIt) {
  Options cached = no_caches();
  cached.use_cache = true;
  const uint8_t* addr = nullptr;
  {
    Kernel k = compile(problem(0), cached);
    addr = k.code();
    Kernel copy = k;  // copies share the code
    EXPECT_EQ(copy.code(), addr);
    ASSERT_TRUE(executable_at(addr));
  }
  // The handles are gone; the cache entry still holds the code.
  EXPECT_TRUE(executable_at(addr));
  EXPECT_EQ(compile(problem(0), cached).code(), addr);
  cache_clear();
  EXPECT_FALSE(executable_at(addr)) << "code still mapped executable after the last holder went away";

  // The other order: the entry goes first, the handle keeps it alive.
  Kernel k = compile(problem(1), cached);
  addr = k.code();
  cache_clear();
  EXPECT_TRUE(executable_at(addr));
  k = Kernel();
  EXPECT_FALSE(executable_at(addr));

  // Evicted by the LRU while no handle holds it (shrinking the capacity evicts without compiling anything
  // new, so no fresh code can reuse the address before the check).
  cache_set_capacity(2);
  addr = compile(problem(2), cached).code();
  const uint8_t* kept = compile(problem(3), cached).code();
  EXPECT_TRUE(executable_at(addr));
  cache_set_capacity(1);  // evicts problem(2), the least recently used
  EXPECT_FALSE(executable_at(addr));
  EXPECT_TRUE(executable_at(kept));
  cache_set_capacity(1024);
}

TEST_F(CodeMemory, UncachedKernelsAreReleasedWithTheirLastHandle) {
  std::vector<const uint8_t*> addrs;
  {
    std::vector<Kernel> ks;
    for (int i = 0; i < 8; ++i) ks.push_back(compile(problem(i), no_caches()));
    for (const Kernel& k : ks) {
      addrs.push_back(k.code());
      EXPECT_TRUE(executable_at(k.code()));
    }
  }
  for (const uint8_t* a : addrs) EXPECT_FALSE(executable_at(a));
}

// The same plan gives the same bytes at two different addresses: code generation is deterministic and
// the code is position independent (what the on-disk cache relies on).
TEST_F(CodeMemory, BytesAreDeterministicAndPositionIndependent) {
  for (Isa isa : {Isa::avx512_core, Isa::avx2}) {
    if (!isa_available(isa)) continue;
    for (int i = 0; i < 6; ++i) {
      const Kernel a = compile(problem(i), no_caches(isa)), b = compile(problem(i), no_caches(isa));
      ASSERT_NE(a.code(), b.code());
      ASSERT_EQ(a.code_size(), b.code_size()) << a.name();
      EXPECT_EQ(std::memcmp(a.code(), b.code(), a.code_size()), 0) << a.name();
      EXPECT_LT(a.code_size(), size_t{1} << 20) << a.name();
    }
  }
}

}  // namespace
}  // namespace deconvjit
