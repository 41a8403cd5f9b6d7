// The Megatron index cache against datasets rewritten under the same prefix: ptdp's key beside
// the index files (the sequence lengths' digest), the check of files without it (Megatron's own),
// and the refusal of a sample shorter than seq_len + 1 tokens. Its .npy writes on a full disk
// (a 64 KiB tmpfs mounted in a child's own mount namespace; skipped where none can be mounted) and
// under a file size limit (setrlimit in a child): one error naming the file, nothing left behind.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <vector>

#include "core/common/error.h"
#include "core/data/indexed_dataset_writer.h"
#include "core/data/megatron_gpt_indices.h"
#include "core/data/megatron_samples.h"
#include "core/data/npy_file.h"
#include "core/data/testing/data_test_util.h"

namespace ptdp {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr int kSeqLen = 8;

// A dataset of one sequence per length, token t of the whole stream being t % 1000.
void write_dataset(const std::string& prefix, const std::vector<int>& lengths) {
  IndexedDatasetWriter w(prefix, TokenDType::U16);
  int32_t next = 0;
  for (int n : lengths) {
    std::vector<int32_t> doc(static_cast<size_t>(n));
    for (auto& t : doc) t = next++ % 1000;
    w.add_document(doc);
  }
  w.finalize();
}

// Ten documents of 200 tokens in all, the same count and total as kUneven: an index of kEven read
// over kUneven has samples that end early in a shorter document and samples that run past one.
const std::vector<int> kEven(10, 20);
const std::vector<int> kUneven = {17, 23, 17, 23, 17, 23, 17, 23, 17, 23};

MegatronDataOptions options(const std::string& prefix, const std::string& cache) {
  MegatronDataOptions o;
  o.data = {prefix};
  o.split = "1,0,0";
  o.num_samples = 20;
  o.seq_len = kSeqLen;
  o.cache_dir = cache;
  return o;
}

std::vector<std::vector<int32_t>> all_samples(const MegatronSamples& s) {
  std::vector<std::vector<int32_t>> out;
  for (int64_t i = 0; i < s.num_samples(); ++i) {
    std::vector<int32_t> x(kSeqLen + 1, -1);
    s.get(i, x.data());
    out.push_back(x);
  }
  return out;
}

// The samples of `prefix` from an index built now in a fresh cache.
std::vector<std::vector<int32_t>> fresh_samples(const TempDir& dir, const std::string& prefix) {
  return all_samples(MegatronSamples(options(prefix, dir.file("fresh-cache"))));
}

TEST(MegatronCache, ADatasetRewrittenWithTheSameCountsGetsItsIndexRebuilt) {
  TempDir dir;
  const std::string prefix = dir.file("ds");
  write_dataset(prefix, kEven);
  const MegatronSamples first(options(prefix, dir.file("cache")));
  EXPECT_FALSE(first.datasets()[0].index_files_found);
  EXPECT_TRUE(fs::exists(first.datasets()[0].index_files + "-ptdp-dataset.txt"));
  write_dataset(prefix, kUneven);  // Megatron's description of it is the same text
  const MegatronSamples second(options(prefix, dir.file("cache")));
  EXPECT_FALSE(second.datasets()[0].index_files_found);
  EXPECT_EQ(second.datasets()[0].index_files, first.datasets()[0].index_files);  // rebuilt in place
  EXPECT_EQ(all_samples(second), fresh_samples(dir, prefix));
  // And found as it is on the next run.
  EXPECT_TRUE(MegatronSamples(options(prefix, dir.file("cache"))).datasets()[0].index_files_found);
}

TEST(MegatronCache, IndexFilesWithoutPtdpsKeyAreCheckedAgainstTheSequenceLengths) {
  TempDir dir;
  const std::string prefix = dir.file("ds");
  write_dataset(prefix, kEven);
  const std::string base = MegatronSamples(options(prefix, dir.file("cache"))).datasets()[0].index_files;
  fs::remove(base + "-ptdp-dataset.txt");  // as Megatron-core writes its cache
  EXPECT_TRUE(MegatronSamples(options(prefix, dir.file("cache"))).datasets()[0].index_files_found);
  write_dataset(prefix, kUneven);
  const MegatronSamples again(options(prefix, dir.file("cache")));
  EXPECT_FALSE(again.datasets()[0].index_files_found);
  EXPECT_EQ(all_samples(again), fresh_samples(dir, prefix));
}

TEST(MegatronCache, ASampleShorterThanSeqLenPlusOneIsNeverRead) {
  TempDir dir;
  const std::string prefix = dir.file("ds");
  write_dataset(prefix, kEven);
  MegatronGptParams p;
  p.seq_len = kSeqLen;
  p.num_samples = 20;
  {
    const IndexedDataset ds = IndexedDataset::open(prefix);
    build_megatron_gpt_indices(ds, {0, ds.num_sequences()}, p, dir.file("idx"));
  }
  write_dataset(prefix, kUneven);
  const IndexedDataset ds = IndexedDataset::open(prefix);
  const MegatronGptIndices indices = MegatronGptIndices::open(dir.file("idx"));
  const std::string why = indices.misfit(ds, kSeqLen, true, false);
  EXPECT_NE(why.find("-sample_index.npy: sample "), std::string::npos) << why;
  int short_ones = 0;
  std::vector<int32_t> out(kSeqLen + 1);
  for (int64_t i = 0; i < indices.num_samples(); ++i) {
    try {
      indices.read_sample(ds, i, kSeqLen, true, out.data());
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(prefix), std::string::npos) << what;
      if (what.find("tokens: the index files were built for another version of " + prefix) != std::string::npos)
        ++short_ones;
    }
  }
  EXPECT_GT(short_ones, 0) << "a short sample was read and padded with zeros";
}

// A blend index altered by hand (a negative or too large sample of a dataset): one UsageError
// naming the file and the item, at open, not an internal check when the sample is read.
TEST(MegatronCache, AnAlteredBlendIndexIsRefusedNamingTheFileAndItem) {
  TempDir dir;
  write_dataset(dir.file("a"), kEven);
  write_dataset(dir.file("b"), kEven);
  MegatronDataOptions o = options(dir.file("a"), dir.file("cache"));
  o.data = {"1", dir.file("a"), "1", dir.file("b")};
  o.num_samples = 10;
  const std::string file = MegatronSamples(o).blend_index_files() + "-dataset_sample_index.npy";
  for (const int64_t bad : {int64_t{-1}, int64_t{1} << 40}) {
    SCOPED_TRACE(bad);
    {
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(128 + 8 * 3);  // item 3, after numpy's 128-byte header
      f.write(reinterpret_cast<const char*>(&bad), 8);
    }
    try {
      const MegatronSamples s(o);
      all_samples(s);
      ADD_FAILURE() << "accepted";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(file + ": ", 0), 0u) << e.what();
    }
  }
}

// Runs fn in a child process: its return value as the exit code (3 for an exception it did not
// catch), or -N when signal N ended it.
int in_child(const std::function<int()>& fn) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 3;
    try {
      rc = fn();
    } catch (...) {
    }
    ::_exit(rc);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// Writes a 1 MB .npy file in `dir`: 0 when it fails with one RuntimeError naming the file and
// `cause` and leaves nothing in dir, 10 when it succeeds, 11/12 for another message or a leftover.
int write_npy_expecting(const std::string& dir, const std::string& cause) {
  const std::string path = dir + "/x-document_index.npy";
  try {
    NpyWriter w(path, NpyType::I64, {131072});
    std::memset(w.data<int64_t>(), 1, 131072 * 8);
    w.finish();
    return 10;
  } catch (const RuntimeError& e) {
    if (std::string(e.what()) != path + ": cannot write 1048704 bytes: " + cause) return 11;
  }
  return fs::is_empty(dir) ? 0 : 12;
}

TEST(MegatronCache, AnIndexWriteUnderAFileSizeLimitFailsNamingTheFile) {
  TempDir dir;
  const int rc = in_child([&] {
    std::signal(SIGXFSZ, SIG_IGN);  // as ptdp's main does: the write fails with EFBIG
    const rlimit limit{65536, 65536};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 77;
    return write_npy_expecting(dir.file(""), std::strerror(EFBIG));
  });
  EXPECT_EQ(rc, 0);
}

TEST(MegatronCache, AnIndexWriteOnAFullDiskFailsNamingTheFileInsteadOfSigbus) {
  TempDir dir;
  const int rc = in_child([&] {
    // A 64 KiB tmpfs over dir, in this child's own mount namespace (as root, or in a user
    // namespace of its own where the kernel allows one).
    if (::unshare(CLONE_NEWNS) != 0 && ::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return 77;
    if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
    if (::mount("tmpfs", dir.file("").c_str(), "tmpfs", 0, "size=64k") != 0) return 77;
    return write_npy_expecting(dir.file(""), std::strerror(ENOSPC));
  });
  if (rc == 77) GTEST_SKIP() << "no tmpfs can be mounted here (no mount namespace)";
  EXPECT_EQ(rc, 0) << "-7 is SIGBUS";
}

}  // namespace
}  // namespace ptdp
