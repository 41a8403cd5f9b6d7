// Test helpers for the ptdp command line: run the real binary with fixed arguments (no shell),
// capture its exit code, stdout and stderr, and check the bad-input contract (one
// "ptdp: error: " line on stderr, exit code 2).
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include <cerrno>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "core/data/testing/data_test_util.h"

#ifndef PTDP_EXE
#error "PTDP_EXE (the path of the ptdp binary) must be defined by the build"
#endif

namespace ptdp::testing {

struct CliResult {
  int exit_code = -1;  // the exit status; -N when killed by signal N
  std::string out, err;
};

inline std::string text_of(const std::string& path) {
  const std::vector<uint8_t> b = read_file(path);
  return {b.begin(), b.end()};
}

// A started `ptdp` process: its pid and the files its stdout and stderr go to.
struct CliProcess {
  pid_t pid = -1;
  std::string out_path, err_path;
};

// Starts `ptdp ARGS...` with OMP_NUM_THREADS=1 (and PTDP_LOADAVG idle unless set), its stdout and stderr going to files in `dir`.
// A run that takes longer than `timeout_s` is killed (SIGALRM) and reported as -SIGALRM.
inline CliProcess start_ptdp(const TempDir& dir, const std::vector<std::string>& args, unsigned timeout_s = 120) {
  static int counter = 0;
  const int n = counter++;
  CliProcess p;
  p.out_path = dir.file("run" + std::to_string(n) + ".stdout");
  p.err_path = dir.file("run" + std::to_string(n) + ".stderr");
  std::vector<std::string> argv_s = {PTDP_EXE};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  p.pid = ::fork();
  if (p.pid < 0) {
    ADD_FAILURE() << "fork failed";
    return p;
  }
  if (p.pid == 0) {
    const int out = ::open(p.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(p.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(127);
    ::close(out);
    ::close(err);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    // The health check's host load (accept_health.h) as an idle host's, unless the test sets
    // one: the load of the tests running beside this one is not the subject.
    ::setenv("PTDP_LOADAVG", "0.00 0.00 0.00 1/1 1", 0);
    ::alarm(timeout_s);  // kept across execv: a hung ptdp dies of SIGALRM
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return p;
}

// Waits for a started process and collects its exit code and output.
inline CliResult wait_ptdp(const CliProcess& p) {
  int status = 0;
  while (::waitpid(p.pid, &status, 0) < 0) {
    if (errno != EINTR) {
      ADD_FAILURE() << "waitpid failed";
      return {};
    }
  }
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  r.out = text_of(p.out_path);
  r.err = text_of(p.err_path);
  return r;
}

// Runs `ptdp ARGS...` to its end (start_ptdp, then wait_ptdp).
inline CliResult run_ptdp(const TempDir& dir, const std::vector<std::string>& args, unsigned timeout_s = 120) {
  const CliProcess p = start_ptdp(dir, args, timeout_s);
  if (p.pid < 0) return {};
  return wait_ptdp(p);
}

// The bad-input contract: exit code 2, stderr exactly one line "ptdp: error: ..." that
// contains every one of `needles`.
inline ::testing::AssertionResult IsUsageError(const CliResult& r, const std::vector<std::string>& needles) {
  auto fail = [&](const std::string& why) {
    return ::testing::AssertionFailure() << why << "\n  exit code: " << r.exit_code << "\n  stderr: [" << r.err
                                         << "]\n  stdout: [" << r.out << "]";
  };
  if (r.exit_code != 2) return fail("expected exit code 2");
  if (r.err.empty() || r.err.back() != '\n' || r.err.find('\n') != r.err.size() - 1)
    return fail("expected exactly one line on stderr");
  if (r.err.rfind("ptdp: error: ", 0) != 0) return fail("expected stderr to start with 'ptdp: error: '");
  for (const auto& n : needles)
    if (r.err.find(n) == std::string::npos) return fail("expected stderr to contain '" + n + "'");
  return ::testing::AssertionSuccess();
}

// Splits one CSV line into fields; quoted fields may hold commas and doubled quotes.
inline std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

// The path of a file of the source tree, from its path relative to the repository root.
inline std::string source_file(const std::string& rel) { return std::string(PTDP_SOURCE_DIR) + "/" + rel; }

// Writes `text` to the file `name` in `dir`; returns its path.
inline std::string write_text(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  write_file(path, std::vector<uint8_t>(text.begin(), text.end()));
  return path;
}

// The lines of a text, without their '\n'; a last line without '\n' counts too.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  return lines;
}

// The last row of a result CSV by column name (empty when the file has no row).
inline std::map<std::string, std::string> last_result_row(const std::string& path) {
  const std::vector<std::string> lines = lines_of(text_of(path));
  std::map<std::string, std::string> f;
  if (lines.size() < 2) return f;
  const std::vector<std::string> head = split_csv_line(lines.front()), row = split_csv_line(lines.back());
  for (size_t i = 0; i < head.size() && i < row.size(); ++i) f[head[i]] = row[i];
  return f;
}

}  // namespace ptdp::testing
