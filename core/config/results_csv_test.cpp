// Result CSV appends: every row of concurrent writers kept exactly once (threads and processes),
// user files written through (symlinks, hard links, modes), non-regular targets refused at once.
#include "core/config/results_csv.h"
#include "core/results/output_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/common/error.h"
#include "core/data/testing/data_test_util.h"

namespace ptdp {
namespace {

using testing::TempDir;

ResultRow row_named(const std::string& experiment) {
  ResultRow r;
  r.set("experiment", experiment);
  r.set("tokens_per_s", 1234.5);
  return r;
}

// Every expected experiment name exactly once, one header, nothing else.
void expect_rows(const std::string& path, int writers, int rows_each) {
  std::istringstream in(testing::read_text(path));
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line, result_header_line());
  std::map<std::string, int> seen;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    ++seen[line.substr(0, line.find(','))];
  }
  EXPECT_EQ(lines, writers * rows_each);
  for (int w = 0; w < writers; ++w)
    for (int i = 0; i < rows_each; ++i) EXPECT_EQ(seen[fmt::format("w{}-r{}", w, i)], 1) << "w" << w << "-r" << i;
}

TEST(ResultsCsv, ConcurrentThreadsKeepEveryRowOnce) {
  TempDir dir;
  const std::string path = dir.file("rows.csv");
  constexpr int kWriters = 8, kRows = 25;
  std::vector<std::thread> ts;
  for (int w = 0; w < kWriters; ++w)
    ts.emplace_back([&, w] {
      for (int i = 0; i < kRows; ++i) append_result_rows(path, {row_named(fmt::format("w{}-r{}", w, i))});
    });
  for (auto& t : ts) t.join();
  expect_rows(path, kWriters, kRows);
}

TEST(ResultsCsv, ConcurrentProcessesKeepEveryRowOnce) {
  TempDir dir;
  const std::string path = dir.file("rows.csv");
  constexpr int kWriters = 6, kRows = 20;
  std::vector<pid_t> kids;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        for (int i = 0; i < kRows; ++i) append_result_rows(path, {row_named(fmt::format("w{}-r{}", w, i))});
      } catch (...) {
        rc = 1;
      }
      _exit(rc);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int status = 0;
    ASSERT_EQ(waitpid(k, &status, 0), k);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  expect_rows(path, kWriters, kRows);
}

TEST(ResultsCsv, ASymlinkIsWrittenThroughAndTheTargetKeepsItsModeAndLinks) {
  TempDir dir;
  const std::string target = dir.file("target.csv"), link = dir.file("link.csv"), hard = dir.file("hard.csv");
  append_result_rows(target, {row_named("w0-r0")});
  ASSERT_EQ(::chmod(target.c_str(), 0600), 0);
  std::filesystem::create_symlink(target, link);
  std::filesystem::create_hard_link(target, hard);
  append_result_rows(link, {row_named("w0-r1")});
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_nlink, 2u);
  expect_rows(target, 1, 2);
  EXPECT_EQ(testing::read_text(hard), testing::read_text(target));
}

// Runs `write` in a child process whose files may not grow beyond `limit` bytes (a full disk, as
// the writer sees it: EFBIG instead of ENOSPC); true when it threw, as it must.
bool throws_under_a_size_limit(off_t limit, const std::function<void()>& write) {
  const pid_t pid = fork();
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const struct rlimit lim {static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    try {
      write();
    } catch (const RuntimeError&) {
      _exit(0);
    }
    _exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// A user's file rewritten whole (--loss-log, a sweep's result file) on a full disk keeps its
// previous content, through its symlink and with its mode; an append that fails part way leaves
// no half row.
TEST(ResultsCsv, AFailedWriteOnAFullDiskKeepsThePreviousContent) {
  TempDir dir;
  const std::string target = dir.file("loss.csv"), link = dir.file("link.csv");
  const std::string before = "iteration,loss\n" + std::string(3000, '1') + "\n";
  write_user_file(target, before);
  ASSERT_EQ(::chmod(target.c_str(), 0640), 0);
  std::filesystem::create_symlink(target, link);
  EXPECT_TRUE(throws_under_a_size_limit(4096, [&] { write_user_file(link, std::string(20000, '2')); }));
  EXPECT_EQ(testing::read_text(target), before);
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  write_user_file(link, "shorter\n");  // and a write that fits replaces it whole
  EXPECT_EQ(testing::read_text(target), "shorter\n");

  const std::string rows = dir.file("rows.csv");
  append_result_rows(rows, {row_named("w0-r0")});
  const std::string one_row = testing::read_text(rows);
  ResultRow wide = row_named("w0-r1");
  wide.set("model", std::string(8000, 'm'));
  EXPECT_TRUE(throws_under_a_size_limit(off_t(one_row.size()) + 100, [&] { append_result_rows(rows, {wide}); }));
  EXPECT_EQ(testing::read_text(rows), one_row);
}

TEST(ResultsCsv, AFifoOrDeviceIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.file("rows.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_THROW(check_result_csv(fifo), UsageError);
  EXPECT_THROW(append_result_rows(fifo, {row_named("x")}), RuntimeError);
  EXPECT_THROW(check_result_csv("/dev/null"), UsageError);
  EXPECT_THROW(append_result_rows("/dev/null", {row_named("x")}), RuntimeError);
}

TEST(ResultsCsv, AFileWithAnotherHeaderIsLeftAlone) {
  TempDir dir;
  const std::string path = dir.file("other.csv");
  std::ofstream(path) << "a,b\n1,2\n";
  EXPECT_THROW(append_result_rows(path, {row_named("x")}), UsageError);
  EXPECT_EQ(testing::read_text(path), "a,b\n1,2\n");
}

// A file an older ptdp wrote (today's header up to columns it did not have) is brought to today's
// header in place: its rows kept, each new key column given the key's old default (what such a row
// meant), any other new column left empty; then the new row follows. The reason a refusal would
// give still names the missing columns.
TEST(ResultsCsv, AFileFromAnOlderPtdpIsBroughtUpToDateKeepingItsRows) {
  TempDir dir;
  const std::string path = dir.file("old.csv");
  const std::string h = result_header_line();
  const size_t cut = h.find(",cp,");
  ASSERT_NE(cut, std::string::npos) << "the cp column (key, old default 1) is the test's probe";
  const std::string older = h.substr(0, cut);  // a header from before context parallelism
  const size_t old_cols = size_t(std::count(older.begin(), older.end(), ',')) + 1;
  std::string old_row;
  for (size_t i = 0; i < old_cols; ++i) old_row += (i ? "," : "") + std::string("v");
  std::ofstream(path) << older << "\n" << old_row << "\n";
  check_result_csv(path);  // taken before any work is done
  append_result_rows(path, {row_named("x")});
  const std::string text = testing::read_text(path);
  ASSERT_EQ(text.substr(0, text.find('\n')), h);
  const std::string row1 = text.substr(h.size() + 1, text.find('\n', h.size() + 1) - h.size() - 1);
  std::vector<std::string> cells;
  for (size_t at = 0;; ) {
    const size_t e = row1.find(',', at);
    cells.push_back(row1.substr(at, e == std::string::npos ? std::string::npos : e - at));
    if (e == std::string::npos) break;
    at = e + 1;
  }
  ASSERT_EQ(cells.size(), result_columns().size()) << row1;
  for (size_t i = 0; i < old_cols; ++i) EXPECT_EQ(cells[i], "v") << result_columns()[i];
  auto cell = [&](const char* c) {
    const auto& cols = result_columns();
    return cells[size_t(std::find(cols.begin(), cols.end(), c) - cols.begin())];
  };
  EXPECT_EQ(cell("cp"), "1");  // a row from before context parallelism had one rank per sequence
  EXPECT_EQ(cell("cp_comm_type"), "p2p");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << "the header, the old row and the new one";
  EXPECT_NE(foreign_header_reason(h, older).find("lacks the columns cp,"), std::string::npos);
  EXPECT_EQ(foreign_header_reason("a,b"), "exists but its header is not the result CSV header");
  EXPECT_EQ(foreign_header_reason(h.substr(0, 5)), "exists but its header is not the result CSV header");  // not at a comma
}

TEST(ResultsCsv, AMissingFinalNewlineIsRepairedBeforeTheRow) {
  TempDir dir;
  const std::string path = dir.file("rows.csv");
  append_result_rows(path, {row_named("w0-r0")});
  std::string text = testing::read_text(path);
  text.pop_back();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  append_result_rows(path, {row_named("w0-r1")});
  expect_rows(path, 1, 2);
}

// The result files kept in results/ have today's header or an older one (a prefix of it): a
// column that has shipped never moves, so no file of a user's becomes foreign (results_csv.cpp:
// later_columns).
TEST(ResultsDir, EveryResultFileHasTodaysHeaderOrAnOlderOne) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(PTDP_SOURCE_DIR) + "/results")) {
    if (e.path().extension() != ".csv") continue;
    std::ifstream in(e.path());
    std::string first;
    std::getline(in, first);
    if (first.rfind("experiment,mode,", 0) != 0) continue;  // another kind of file (loss logs, ...)
    ++files;
    const std::string h = result_header_line();
    const bool older = first.size() < h.size() && h.compare(0, first.size(), first) == 0 && h[first.size()] == ',';
    EXPECT_TRUE(first == h || older) << e.path() << ": " << foreign_header_reason(first);
  }
  EXPECT_GT(files, 10);
}

}  // namespace
}  // namespace ptdp
