#include "core/train/checkpoint_resume.h"

#include <filesystem>

#include <fmt/format.h>

#include "core/common/error.h"
#include "core/config/config_fields.h"
#include "core/train/checkpoint.h"

namespace ptdp {

bool loads_an_empty_save_dir(const RunConfig& c) {
  if (c.load_dir.empty() || c.save_dir.empty()) return false;
  std::error_code ec;
  const auto load = std::filesystem::weakly_canonical(c.load_dir, ec);
  if (ec || load != std::filesystem::weakly_canonical(c.save_dir, ec) || ec) return false;
  return !std::filesystem::exists(load / kLatestCheckpointFile, ec) && !ec;
}

RunConfig resume_config(const RunConfig& c) {
  if (c.load_dir.empty() || loads_an_empty_save_dir(c)) return c;
  if (c.override_scheduler && c.use_checkpoint_scheduler)
    usage_error("--override-opt_param-scheduler and --use-checkpoint-opt_param-scheduler are both given: the first "
                "keeps this run's learning-rate schedule, the second takes the checkpoint's");
  const int64_t it = read_latest(c.load_dir);
  const auto saved = recorded_settings(c.load_dir, it, checkpoint_layout(c, 0, 0, 0));
  if (!saved) return c;
  RunConfig out = c;
  for (const RecordedSetting& s : checkpoint_settings(c)) {
    if (s.check == ResumeCheck::Layout) continue;
    const std::string* was = nullptr;
    for (const auto& [name, value] : *saved)
      if (name == s.name) was = &value;
    if (!was || *was == s.value) continue;  // not recorded (an older shard): nothing to compare
    const std::string both = fmt::format("--load {}: the checkpoint was saved with {} {}, this run has {} {}",
                                         c.load_dir, s.label, *was, s.label, s.value);
    if (s.check == ResumeCheck::Data)
      usage_error("{} (a resume continues the checkpoint's samples: give the same {})", both, s.label);
    if (c.override_scheduler) continue;
    if (!c.use_checkpoint_scheduler)
      usage_error("{} (the learning-rate schedule is the checkpoint's: --override-opt_param-scheduler trains with "
                  "this run's, --use-checkpoint-opt_param-scheduler with the checkpoint's)",
                  both);
    find_field(s.name)->set_text(out, *was);
  }
  return out;
}

}  // namespace ptdp
