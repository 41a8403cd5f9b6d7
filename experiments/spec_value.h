// A spec file's TOML (experiments/specs/*.toml) and its required keys, for the commands that read
// their own specs (reproduce llama, reproduce llama-data).
#pragma once
#include <string>

#include <toml++/toml.h>

#include "core/common/error.h"

namespace ptdp {

// The table of spec file `path` holding `text`; UsageError naming the file on a syntax error.
inline toml::table parse_spec_toml(const std::string& text, const std::string& path) {
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    usage_error("{}: {}", path, e.description());
  }
}

// The value of `key` in table `t` of spec file `path`; UsageError naming both when it is missing
// or of another type.
template <class T>
T spec_value(const toml::table& t, const std::string& key, const std::string& path) {
  auto v = t[key].template value<T>();
  if (!v) usage_error("{}: key '{}' is missing or has the wrong type", path, key);
  return *v;
}

}  // namespace ptdp
