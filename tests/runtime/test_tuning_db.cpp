// The tuning database: records round-trip, a store replaces its key and keeps others, concurrent writers
// lose nothing, and compile() follows a usable record and ignores one that no longer builds.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <oneapi/tbb/task_arena.h>

#include "support/deconv_tester.hpp"

namespace deconvjit {
namespace {

using testing::DeconvTester;

class TuningDb : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "deconvjit_tdb_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    db_ = (dir_ / "sub" / "tuning.jsonl").string();  // the directory is created on the first store
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static Descriptor layer(int64_t c_out) {
    return DeconvTester().batch(1).channels(16, c_out).input({6, 6}).kernel({4, 4}).stride({2, 2})
        .pads({1, 1}, {1, 1}).layout(DataFormat::NXC).descriptor();
  }
  Options options() const {
    Options o;
    o.use_cache = false;
    o.use_disk_cache = false;
    o.tuning_db = db_;
    return o;
  }
  std::filesystem::path dir_;
  std::string db_;
};

TEST_F(TuningDb, RecordsRoundTripAndAStoreReplacesItsKey) {
  const Descriptor d = layer(24);
  TuningHints h;
  h.algorithm = "direct", h.ur_w = 3, h.oc_vectors = 2;
  TuningRecord r = make_tuning_record(resolve(d), Isa::best, 2);
  r.hints = h, r.kernel = "a", r.name = "layer";
  tuning_db_store(db_, r);
  TuningRecord other = r;
  other.threads = 1;  // another key: kept beside it
  tuning_db_store(db_, other);
  r.kernel = "b";  // the same key: replaces
  tuning_db_store(db_, r);
  const std::vector<TuningRecord> all = tuning_db_read(db_);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].kernel, "b");
  EXPECT_EQ(all[0].threads, 2);
  EXPECT_EQ(all[1].threads, 1);
  EXPECT_EQ(to_json(all[0].hints), to_json(h));
  EXPECT_EQ(all[0].descriptor, resolve(d).canonical);
  EXPECT_EQ(all[0].cpu, cpu_model_name());
  EXPECT_EQ(tuning_db_clear(db_), 2u);
  EXPECT_TRUE(tuning_db_read(db_).empty());
}

TEST_F(TuningDb, MalformedLinesAreSkippedAndReported) {
  const Descriptor d = layer(24);
  tuning_db_store(db_, make_tuning_record(resolve(d), Isa::best, 2));
  std::ofstream(db_, std::ios::app) << "{not json\n{\"descriptor\": 1}\n";
  std::vector<std::string> errors;
  EXPECT_EQ(tuning_db_read(db_, &errors).size(), 1u);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("line 2"), std::string::npos) << errors[0];
}

TEST_F(TuningDb, ConcurrentWritersLoseNothing) {
  constexpr int kWriters = 4, kEach = 15;
  std::vector<pid_t> kids;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0; i < kEach; ++i) {
        TuningRecord r = make_tuning_record(resolve(layer(1 + i)), Isa::avx2, 1 + w);
        r.kernel = std::to_string(w) + "/" + std::to_string(i);
        tuning_db_store(db_, r);
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int status = 0;
    waitpid(k, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::set<std::string> kernels;
  for (const TuningRecord& r : tuning_db_read(db_)) kernels.insert(r.kernel);
  EXPECT_EQ(kernels.size(), static_cast<size_t>(kWriters * kEach));
}

TEST_F(TuningDb, CompileFollowsAUsableRecordAndIgnoresOneThatNoLongerBuilds) {
  const Descriptor d = layer(40);
  Options plain = options();
  plain.tuning_db = "";
  const Kernel heuristic = compile(d, plain);
  TuningHints h;
  h.algorithm = "direct", h.ur_w = 2, h.oc_vectors = 1;  // not what the heuristic picks
  const Kernel wanted = [&] {
    Options o = plain;
    o.hints = h;
    return compile(d, o);
  }();
  ASSERT_NE(wanted.name(), heuristic.name());
  // Records are kept per thread count: compile() looks up its arena's concurrency.
  const int threads = tbb::this_task_arena::max_concurrency();
  TuningRecord r = make_tuning_record(resolve(d), resolve_isa(Isa::best), threads);
  r.hints = wanted.choices();
  tuning_db_store(db_, r);
  EXPECT_EQ(compile(d, options()).name(), wanted.name());
  // Given hints win over the database.
  Options given = options();
  given.hints.ur_w = 1;
  EXPECT_NE(compile(d, given).name(), wanted.name());
  // A record made on another CPU is not this machine's.
  r.cpu = "another CPU";
  r.hints.ur_w = 3;
  tuning_db_store(db_, r);
  EXPECT_EQ(compile(d, options()).name(), wanted.name());
  // A record whose hints no longer build is ignored: the heuristic plans.
  r.cpu = cpu_model_name();
  r.hints.oc_vectors = 99;
  tuning_db_store(db_, r);
  EXPECT_EQ(compile(d, options()).name(), heuristic.name());
}

}  // namespace
}  // namespace deconvjit
