// The label of a configuration in `ptdp compare`'s reports (the console, JSON, Markdown, JUnit
// test cases): built from its key columns, so that two configurations never share one.
#pragma once
#include <string>
#include <vector>

namespace ptdp {

class ConfigLabels {
 public:
  // `keys`: every configuration of both files, each its values of config_key_columns() in order,
  // then host and device when the key holds the machine (--per-machine).
  explicit ConfigLabels(const std::vector<std::vector<std::string>>& keys);

  // "fig11/simulate/cuda f16 gpt-1.7b t=1 p=1 d=8 v=1 b=4 B=512 1f1b recompute=full sg=1", then
  // every other key column whose value differs from its default or varies between the
  // configurations, as name=value ("query_groups=8 overlap_grad_reduce=1"), then " on HOST/DEVICE"
  // when the key holds the machine.
  std::string operator()(const std::vector<std::string>& key) const;

 private:
  std::vector<bool> shown_;  // per key column: named in the label
};

}  // namespace ptdp
