// An environment variable for the length of a scope: set (or left as it is), and on leaving the
// scope given back its earlier value, or unset again if it had none. For tests that change the
// environment of the processes they start, or of the code they call.
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace ptdp::testing {

class ScopedEnv {
 public:
  explicit ScopedEnv(std::string name) : name_(std::move(name)) {
    if (const char* v = std::getenv(name_.c_str())) old_ = v;
  }
  ScopedEnv(std::string name, const std::string& value) : ScopedEnv(std::move(name)) {
    ::setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_.c_str(), old_->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace ptdp::testing
