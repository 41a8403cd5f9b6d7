// What ptdp's writes do when they cannot complete: under a file size limit (setrlimit in the
// child before it runs ptdp, as `ulimit -f` does) the index cache, a checkpoint and a result CSV
// each end the run with one line naming the file and the cause, exit 1, and nothing half-written
// (ptdp ignores SIGXFSZ: the write fails with EFBIG). The temporaries a killed run left (named as
// a dead process's) are removed by the next run that writes there: the index cache and preprocess.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <string>
#include <vector>

#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::run_ptdp;
using testing::TempDir;
using testing::text_of;

// `ptdp ARGS...` with files limited to `limit_bytes`; stdout to /dev/null (not limited), stderr
// to a pipe (the limit would cut a file short).
CliResult run_ptdp_limited(const std::vector<std::string>& args, rlim_t limit_bytes) {
  std::vector<std::string> argv_s = {PTDP_EXE};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  int err[2];
  if (::pipe(err) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    if (null < 0 || ::dup2(null, 1) < 0 || ::dup2(err[1], 2) < 0) ::_exit(127);
    ::close(err[0]);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    const rlimit limit{limit_bytes, limit_bytes};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(126);
    ::alarm(120);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(err[1]);
  CliResult r;
  char buf[4096];
  for (ssize_t n; (n = ::read(err[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    r.err.append(buf, size_t(n));
  }
  ::close(err[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return r;
}

// One "ptdp: failed: " line holding every needle, exit 1.
::testing::AssertionResult IsOneFailureLine(const CliResult& r, const std::vector<std::string>& needles) {
  auto fail = [&](const std::string& why) {
    return ::testing::AssertionFailure() << why << "\n  exit code: " << r.exit_code << "\n  stderr: [" << r.err << "]";
  };
  if (r.exit_code != 1) return fail("expected exit code 1 (-25 is SIGXFSZ)");
  if (r.err.rfind("ptdp: failed: ", 0) != 0 || r.err.find('\n') != r.err.size() - 1) return fail("expected one line");
  for (const auto& n : needles)
    if (r.err.find(n) == std::string::npos) return fail("expected '" + n + "'");
  return ::testing::AssertionSuccess();
}

// Files under dir whose name holds "tmp".
std::vector<std::string> temporaries_under(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().find("tmp") != std::string::npos) out.push_back(it->path().string());
  return out;
}

// A process id that ran and is gone.
std::string dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return std::to_string(pid);
}

std::string this_host() {
  char buf[HOST_NAME_MAX + 1] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

class CliDataWrites : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = dir_.file("gpl");
    ASSERT_EQ(run_ptdp(dir_, {"preprocess", "--input", "/usr/share/common-licenses/GPL-3", "--output-prefix", data_})
                  .exit_code,
              0);
  }
  std::vector<std::string> train(std::vector<std::string> extra) const {
    std::vector<std::string> args = {"train", "--model", "tiny", "--micro-batch", "2", "--global-batch",
                                     "4",     "--iters", "2",    "--warmup",      "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  TempDir dir_;
  std::string data_;
};

TEST_F(CliDataWrites, AFileSizeLimitEndsTheIndexBuildWithOneLineAndTheNextRunBuildsIt) {
  const std::string cache = dir_.file("cache");
  const auto args = train({"--data-order", "megatron", "--data", data_, "--data-cache-path", cache});
  EXPECT_TRUE(IsOneFailureLine(run_ptdp_limited(args, 100),
                               {cache + "/", "-GPTDataset-train-", ".npy: cannot write", "File too large"}));
  EXPECT_EQ(temporaries_under(cache), std::vector<std::string>{});
  const CliResult next = run_ptdp(dir_, args);
  EXPECT_EQ(next.exit_code, 0) << next.err;
  EXPECT_NE(next.out.find("index built as " + cache), std::string::npos) << next.out;
}

TEST_F(CliDataWrites, AFileSizeLimitEndsACheckpointOrCsvWriteWithOneLine) {
  const std::string ck = dir_.file("ck"), csv = dir_.file("rows.csv");
  EXPECT_TRUE(IsOneFailureLine(run_ptdp_limited(train({"--save", ck}), 100), {ck + "/", "File too large"}));
  EXPECT_EQ(temporaries_under(ck), std::vector<std::string>{});
  EXPECT_TRUE(IsOneFailureLine(run_ptdp_limited(train({"--csv", csv}), 100), {csv + ": write failed: File too large"}));
  EXPECT_EQ(text_of(csv), "") << "no half row";
}

TEST_F(CliDataWrites, TheIndexTemporariesOfAKilledRunAreRemovedByTheNext) {
  const std::string cache = dir_.file("cache");
  fs::create_directories(cache);
  const std::string dead = dead_pid(), base = cache + "/0123456789abcdef0123456789abcdef-GPTDataset-train";
  const std::vector<std::string> left = {base + "-sample_index.npy.ptdp-tmp." + this_host() + "." + dead + ".0",
                                         base + "-shuffle_index.npy.tmp-" + dead + "-1"};  // an earlier version's name
  const std::string users = cache + "/notes.txt.tmp-" + dead + "-1";                       // not the cache's
  for (const auto& f : left) testing::write_text(dir_, f.substr(dir_.file("").size()), "half");
  testing::write_text(dir_, users.substr(dir_.file("").size()), "mine");
  const CliResult r = run_ptdp(dir_, train({"--data-order", "megatron", "--data", data_, "--data-cache-path", cache}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& f : left) EXPECT_FALSE(fs::exists(f)) << f;
  EXPECT_TRUE(fs::exists(users));
}

TEST_F(CliDataWrites, PreprocessRemovesTheTemporariesOfAKilledPreprocess) {
  const std::string dead = dead_pid(), out = dir_.file("again");
  const std::vector<std::string> left = {out + ".bin.ptdp-tmp." + this_host() + "." + dead + ".0",
                                         out + ".idx.tmp." + dead + ".4"};  // an earlier version's name
  for (const auto& f : left) testing::write_text(dir_, f.substr(dir_.file("").size()), "half");
  const CliResult r =
      run_ptdp(dir_, {"preprocess", "--input", "/usr/share/common-licenses/GPL-3", "--output-prefix", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& f : left) EXPECT_FALSE(fs::exists(f)) << f;
  EXPECT_TRUE(fs::exists(out + ".bin"));
}

}  // namespace
}  // namespace ptdp
