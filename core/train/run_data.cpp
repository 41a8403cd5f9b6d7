#include "core/train/run_data.h"

#include <sstream>

#include <fmt/format.h>

#include "core/comm/agreement.h"
#include "core/common/error.h"
#include "core/data/dataset_digest.h"
#include "core/data/megatron_blend.h"
#include "core/data/megatron_samples.h"
#include "core/data/megatron_split.h"
#include "core/train/rank_phase.h"

namespace ptdp {

namespace {

// The evaluations of a run (--eval-iters): one every --eval-interval iterations and one after the
// last, each of eval_iters global batches; Megatron-LM's count of valid samples,
// (train_iters // eval_interval + 1) * eval_iters * global_batch_size.
int64_t valid_samples(const RunConfig& c) {
  const int64_t evaluations = (c.eval_interval > 0 ? c.iters / c.eval_interval : 0) + 1;
  return evaluations * c.eval_iters * c.par.global_batch;
}

// --data-order megatron: --data's items (a prefix, or Megatron's list) and its blend.
MegatronDataOptions megatron_data_options(const RunConfig& c, MegatronBlend* blend) {
  MegatronDataOptions o;
  std::istringstream in(c.data);
  for (std::string item; in >> item;) o.data.push_back(item);
  *blend = parse_megatron_blend(o.data);
  o.split = c.split;
  o.which = MegatronSplit::Train;
  o.num_samples = int64_t(c.iters) * c.par.global_batch;  // Megatron's train_samples
  o.seq_len = c.model.seq_length;
  o.seed = c.seed;
  o.cache_dir = c.data_cache;  // empty: Megatron-core's default places beside each dataset
  return o;
}

// Megatron-LM evaluates the test split once, after training: eval_iters global batches from its
// start. A split that gives it no documents builds none (do_test is false).
std::unique_ptr<MegatronSamples> megatron_test_split(const RunConfig& c, MegatronDataOptions to, RunLog* log) {
  if (parse_megatron_split(c.split)[2] == 0) {
    if (log) log->test_split_skipped("");
    return nullptr;
  }
  to.which = MegatronSplit::Test;
  to.num_samples = int64_t(c.eval_iters) * c.par.global_batch;
  std::unique_ptr<MegatronSamples> ts;
  try {
    ts = std::make_unique<MegatronSamples>(to);
  } catch (const UsageError& e) {
    if (log) log->test_split_skipped(e.what());
    return nullptr;
  }
  if (log) log->split_ready(MegatronSplit::Test, *ts, to.num_samples);
  return ts;
}

// This rank's Megatron-order splits: the train split, and with --eval-iters the valid and test
// splits, from the same files and settings.
void set_up_megatron_splits(const RunConfig& c, const MegatronDataOptions& mo, const MegatronBlend& blend, RunLog* log,
                            RunData& d) {
  for (const auto& prefix : blend.prefixes)
    check_vocab(IndexedDataset::open(prefix), c.model.vocab_size, "--vocab-size");
  auto ms = std::make_unique<MegatronSamples>(mo);
  if (log) log->split_ready(MegatronSplit::Train, *ms, mo.num_samples);
  for (const auto& u : ms->datasets())
    d.sources += fmt::format("{}{}:{:.6g}", d.sources.empty() ? "" : ";", u.samples_drawn, u.epochs_drawn);
  d.train = std::move(ms);
  if (c.eval_iters == 0) return;
  MegatronDataOptions vo = mo;
  vo.which = MegatronSplit::Valid;
  vo.num_samples = valid_samples(c);
  auto vs = std::make_unique<MegatronSamples>(vo);
  if (log) log->split_ready(MegatronSplit::Valid, *vs, vo.num_samples);
  d.valid = std::move(vs);
  d.test = megatron_test_split(c, mo, log);
}

// --data-order ptdp: synthetic tokens, or windows over a dataset's token stream.
void set_up_ptdp_order(const RunConfig& c, RunData& d) {
  const ModelConfig& m = c.model;
  if (c.data == "synthetic") {
    d.train = std::make_unique<SyntheticSamples>(m.vocab_size, m.seq_length, c.seed);
    // Synthetic data has no split: the evaluations read another synthetic stream (seed + 1).
    if (c.eval_iters > 0) d.valid = std::make_unique<SyntheticSamples>(m.vocab_size, m.seq_length, c.seed + 1);
    return;
  }
  d.dataset = std::make_unique<IndexedDataset>(IndexedDataset::open(c.data));
  check_vocab(*d.dataset, m.vocab_size, "--vocab-size");
  auto samples = std::make_unique<DatasetSamples>(*d.dataset, m.seq_length, c.seed);
  const int64_t drawn = int64_t(c.iters) * c.par.global_batch;
  d.sources = fmt::format("{}:{:.6g}", drawn, double(drawn) / double(samples->num_samples()));
  d.train = std::move(samples);
}

// Each dataset prefix of --data and the SHA-256 of its .idx and .bin (none for synthetic data).
std::vector<std::pair<std::string, std::string>> data_digests(const RunConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  if (c.data == "synthetic") return out;
  std::vector<std::string> items;
  std::istringstream in(c.data);
  for (std::string item; in >> item;) items.push_back(item);
  const std::vector<std::string> prefixes =
      c.data_order == DataOrder::Megatron ? parse_megatron_blend(items).prefixes : std::vector<std::string>{c.data};
  for (const auto& prefix : prefixes) out.emplace_back(prefix, dataset_content_digest(IndexedDataset::open(prefix)));
  return out;
}

}  // namespace

void require_same_data(Communicator& world, const std::vector<std::pair<std::string, std::string>>& digests) {
  std::vector<std::pair<std::string, std::string>> fields;
  for (const auto& [prefix, digest] : digests)
    fields.emplace_back(fmt::format("the content of --data {} ({}.idx and {}.bin)", prefix, prefix, prefix),
                        "SHA-256 " + digest.substr(0, 16));
  require_same_fields(world, fields,
                      "every rank must read the same dataset: the copy of the ranks that differ is another file (copy "
                      "it again)");
}

RunData set_up_run_data(const RunConfig& c, Communicator& launched, bool rank0, RunLog* log) {
  RunData d;
  if (c.data_order != DataOrder::Megatron) {
    rank_phase(launched, [&] { set_up_ptdp_order(c, d); });
  } else {
    for (const bool first : {true, false})
      rank_phase(launched, [&] {
        MegatronBlend blend;  // parsed inside the phase: a bad list ends every rank with its cause
        const MegatronDataOptions mo = megatron_data_options(c, &blend);
        if (rank0 == first) set_up_megatron_splits(c, mo, blend, log, d);
      });
  }
  // Thread ranks read one file; processes may each read their node's copy.
  if (launched.backend() == "mpi" && launched.size() > 1) {
    std::vector<std::pair<std::string, std::string>> digests;
    rank_phase(launched, [&] { digests = data_digests(c); });
    require_same_data(launched, digests);
  }
  return d;
}

}  // namespace ptdp
