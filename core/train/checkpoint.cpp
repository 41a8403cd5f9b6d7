#include "core/train/checkpoint.h"

#include <cstring>
#include <random>
#include <tuple>
#include <utility>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/common/regular_file.h"
#include "core/model/layer_split.h"
#include "core/results/output_files.h"

namespace ptdp {

namespace {

constexpr char kMagic[8] = {'P', 'T', 'D', 'P', 'C', 'K', 'P', 'T'};
// 2: loss scaler trackers, f32 master weights; 3: sharded optimizer state; 4: the architecture
// (0 gpt, 1 llama) and the MLP hidden size; 5: the gradient bucket size of --zero 1 and the save id;
// 6: the query groups (key/value heads) of grouped-query attention; 7: the norm epsilon and the
// rotary base (what an export to another framework needs beside the weights); 8: the layers of the
// first and last pipeline stage (uneven stages).
constexpr uint32_t kVersion = 8;
const char* kLatest = "latest_checkpointed_iteration.txt";
const char* kShardFile = "model_optim_rng.bin";
const char* kManifest = "save_id.txt";

// Fixed-size header; the tensors follow, then an FNV-1a checksum of everything before it.
struct Header {
  char magic[8];
  uint32_t version;
  int32_t tp, pp, vpp, tp_rank, pp_rank;
  int32_t layers, hidden, heads, seq_length;
  int64_t vocab_size;
  uint64_t seed;
  int64_t global_batch;
  int64_t iteration;
  double loss_scale;
  int32_t chunks;
  int32_t scale_growth, scale_hysteresis;
  int32_t zero, dp, dp_rank;
  int32_t arch, ffn_hidden;  // version 4
  int64_t bucket_elems;      // version 5: --zero 1's --grad-bucket-size (0 otherwise)
  uint64_t save_id;          // version 5: the save this shard belongs to (also in the latest marker)
  int32_t query_groups;      // version 6: key/value heads (heads without grouped-query attention)
  uint32_t layout_hash;      // version 6: 0; a hash of --pipeline-model-parallel-layout (0: none)
  double norm_eps;           // version 7: LayerNorm / RMSNorm epsilon (--norm-epsilon)
  double rope_theta;         // version 7: the rotary base (llama; recorded for gpt too)
  int32_t first_stage_layers, last_stage_layers;  // version 8: layers of pipeline stage 0 and p-1
};
static_assert(sizeof(Header) == 168, "docs/PYTORCH.md documents the header, scripts/ptdp_checkpoint.py reads it");

int groups_of(const CheckpointLayout& l) { return l.query_groups > 0 ? l.query_groups : l.heads; }

// The layers of stage 0 and stage pp-1 (an even split's when the layout leaves them 0).
std::pair<int, int> end_stages(const CheckpointLayout& l) {
  const LayerSplit even{l.layers, l.pp, l.vpp};
  return {l.first_stage_layers > 0 ? l.first_stage_layers : stage_layer_count(even, 0),
          l.last_stage_layers > 0 ? l.last_stage_layers : stage_layer_count(even, l.pp - 1)};
}

// The layers each pipeline stage holds, as `simulate` prints them: "3 | 5", "2 | 3 x 4 | 2".
std::string stage_text(const CheckpointLayout& l) {
  if (l.pp == 1) return fmt::format("{}", l.layers);
  const auto [first, last] = end_stages(l);
  return describe_stages({l.layers, l.pp, l.vpp, first, last});
}

uint64_t fnv(const std::string& bytes) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

void put(std::string& out, const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
template <class T> void put(std::string& out, const T& v) { put(out, &v, sizeof v); }

std::string layout_text(const CheckpointLayout& l) {
  return l.layout_hash ? fmt::format("a layout of hash {:08x}", l.layout_hash) : "none";
}

std::string describe(const CheckpointLayout& l) {
  return fmt::format("--tp {} --pp {} --vpp {}{}{}, --arch {} l={} h={} a={} g={} ffn={} s={} V={} eps={} theta={}, seed {}, "
                     "global batch {}",
                     l.tp, l.pp, l.vpp, l.pp > 1 ? fmt::format(" (layers per stage {})", stage_text(l)) : std::string(),
                     l.zero ? fmt::format(" --zero {} on d={}{}", l.zero, l.dp,
                                          l.zero == 1 ? fmt::format(" --grad-bucket-size {}", l.bucket_elems) : "")
                            : std::string(" --zero 0"),
                     enum_name(l.arch), l.layers, l.hidden, l.heads, groups_of(l), l.ffn_hidden, l.seq_length, l.vocab_size, l.norm_eps,
                     l.rope_theta, l.seed, l.global_batch);
}

// The file of this rank: one per (tensor, pipeline) rank, or per data-parallel rank too.
std::string shard_file(const std::string& dir, int64_t iteration, const CheckpointLayout& l) {
  return (std::filesystem::path(shard_dir(dir, iteration, l.tp_rank, l.pp_rank, l.pp)) /
          (l.zero ? fmt::format("zero_dp_rank_{:03d}.bin", l.dp_rank) : std::string(kShardFile)))
      .string();
}

CheckpointLayout layout_of(const Header& h) {
  CheckpointLayout l;
  l.tp = h.tp, l.pp = h.pp, l.vpp = h.vpp, l.tp_rank = h.tp_rank, l.pp_rank = h.pp_rank;
  l.layers = h.layers, l.hidden = h.hidden, l.heads = h.heads, l.seq_length = h.seq_length;
  l.vocab_size = h.vocab_size, l.seed = h.seed, l.global_batch = h.global_batch;
  l.zero = h.zero, l.dp = h.dp, l.dp_rank = h.dp_rank;
  l.arch = h.arch == 1 ? Arch::Llama : Arch::Gpt, l.ffn_hidden = h.ffn_hidden;
  l.bucket_elems = h.bucket_elems;
  l.query_groups = h.query_groups;
  l.norm_eps = h.norm_eps, l.rope_theta = h.rope_theta;
  l.first_stage_layers = h.first_stage_layers, l.last_stage_layers = h.last_stage_layers;
  l.layout_hash = h.layout_hash;
  return l;
}

// The first field in which the saved layout `a` and the run's `b` differ: "NAME SAVED, this run
// has NAME RUN"; empty when they agree.
std::string first_difference(const CheckpointLayout& a, const CheckpointLayout& b) {
  const std::vector<std::tuple<const char*, std::string, std::string>> fields = {
      {"--tp", fmt::format("{}", a.tp), fmt::format("{}", b.tp)},
      {"--pp", fmt::format("{}", a.pp), fmt::format("{}", b.pp)},
      {"--vpp", fmt::format("{}", a.vpp), fmt::format("{}", b.vpp)},
      {"--layers", fmt::format("{}", a.layers), fmt::format("{}", b.layers)},
      {"layers per stage (--decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers)", stage_text(a), stage_text(b)},
      {"--pipeline-model-parallel-layout", layout_text(a), layout_text(b)},
      {"tensor-parallel rank", fmt::format("{}", a.tp_rank), fmt::format("{}", b.tp_rank)},
      {"pipeline rank", fmt::format("{}", a.pp_rank), fmt::format("{}", b.pp_rank)},
      {"--arch", std::string(enum_name(a.arch)), std::string(enum_name(b.arch))},
      {"--hidden", fmt::format("{}", a.hidden), fmt::format("{}", b.hidden)},
      {"--heads", fmt::format("{}", a.heads), fmt::format("{}", b.heads)},
      {"--num-query-groups", fmt::format("{}", groups_of(a)), fmt::format("{}", groups_of(b))},
      {"the MLP hidden size", fmt::format("{}", a.ffn_hidden), fmt::format("{}", b.ffn_hidden)},
      {"--seq-length", fmt::format("{}", a.seq_length), fmt::format("{}", b.seq_length)},
      {"--vocab-size", fmt::format("{}", a.vocab_size), fmt::format("{}", b.vocab_size)},
      {"--norm-epsilon", fmt::format("{}", a.norm_eps), fmt::format("{}", b.norm_eps)},
      {"the rotary base", fmt::format("{}", a.rope_theta), fmt::format("{}", b.rope_theta)},
      {"--seed", fmt::format("{}", a.seed), fmt::format("{}", b.seed)},
      {"--global-batch", fmt::format("{}", a.global_batch), fmt::format("{}", b.global_batch)},
      {"--zero", fmt::format("{}", a.zero), fmt::format("{}", b.zero)}};
  for (const auto& [name, saved, run] : fields)
    if (saved != run) return fmt::format("{} {}, this run has {} {}", name, saved, name, run);
  if (a.zero == 0) return "";
  if (a.dp != b.dp) return fmt::format("--zero {} on d={}, this run has d={}", a.zero, a.dp, b.dp);
  if (a.dp_rank != b.dp_rank) return fmt::format("data-parallel rank {}, this run has {}", a.dp_rank, b.dp_rank);
  if (a.zero == 1 && a.bucket_elems != b.bucket_elems)  // each rank's pieces are chunks of the buckets
    return fmt::format("--grad-bucket-size {}, this run has --grad-bucket-size {} (it lays out the sharded optimizer "
                       "state)",
                       a.bucket_elems, b.bucket_elems);
  return "";
}

}  // namespace

uint32_t pipeline_layout_hash(const std::string& canonical) {
  const uint64_t h = fnv(canonical);
  return uint32_t(h ^ (h >> 32)) | 1u;
}

std::string shard_dir(const std::string& dir, int64_t iteration, int tp_rank, int pp_rank, int pp) {
  std::string rank = pp > 1 ? fmt::format("mp_rank_{:02d}_{:03d}", tp_rank, pp_rank) : fmt::format("mp_rank_{:02d}", tp_rank);
  return (std::filesystem::path(dir) / fmt::format("iter_{:07d}", iteration) / rank).string();
}

void save_shard(const std::string& dir, const CheckpointLayout& l, const CheckpointState& state,
                const std::vector<Gpt*>& chunks, const std::vector<AdamW*>& opts) {
  PTDP_CHECK(chunks.size() == opts.size(), "one optimizer per chunk");
  PTDP_CHECK(l.ffn_hidden > 0, "CheckpointLayout::ffn_hidden is not set");
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.tp = l.tp, h.pp = l.pp, h.vpp = l.vpp, h.tp_rank = l.tp_rank, h.pp_rank = l.pp_rank;
  h.layers = l.layers, h.hidden = l.hidden, h.heads = l.heads, h.seq_length = l.seq_length;
  h.vocab_size = l.vocab_size, h.seed = l.seed, h.global_batch = l.global_batch;
  h.iteration = state.iteration;
  h.loss_scale = state.loss_scale;
  h.chunks = static_cast<int32_t>(chunks.size());
  h.scale_growth = state.scale_growth;
  h.scale_hysteresis = state.scale_hysteresis;
  h.zero = l.zero, h.dp = l.zero ? l.dp : 1, h.dp_rank = l.zero ? l.dp_rank : 0;
  h.arch = l.arch == Arch::Llama ? 1 : 0, h.ffn_hidden = l.ffn_hidden;
  h.bucket_elems = l.zero == 1 ? l.bucket_elems : 0;
  h.save_id = state.save_id;
  h.query_groups = groups_of(l);
  h.norm_eps = l.norm_eps, h.rope_theta = l.rope_theta;
  std::tie(h.first_stage_layers, h.last_stage_layers) = end_stages(l);
  h.layout_hash = l.layout_hash;
  std::string out;
  put(out, h);
  for (size_t j = 0; j < chunks.size(); ++j) {
    const int64_t n = opts[j]->state_numel();
    const int64_t step = opts[j]->steps_taken();
    put(out, n);
    put(out, step);
    Backend& be = chunks[j]->backend();
    const Tensor master = opts[j]->master_state();
    for (const Tensor* t : {&master, const_cast<const Tensor*>(&opts[j]->exp_avg()), const_cast<const Tensor*>(&opts[j]->exp_avg_sq())}) {
      const Tensor h = to_host(be, *t);
      put(out, h.raw(), h.nbytes());
    }
  }
  put(out, fnv(out));
  const std::string file = shard_file(dir, state.iteration, l);
  const std::string d = std::filesystem::path(file).parent_path().string();
  std::error_code ec;
  std::filesystem::create_directories(d, ec);
  if (ec) throw UsageError(fmt::format("--save {}: cannot create {}: {}", dir, d, ec.message()));
  write_file_atomic(file, out);
}

uint64_t new_save_id() {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (uint64_t(rd()) << 32) ^ rd();
  return id;
}

namespace {
// The save's manifest: its id, in the iteration's directory beside the rank directories.
std::string manifest_file(const std::string& dir, int64_t iteration) {
  return (std::filesystem::path(dir) / fmt::format("iter_{:07d}", iteration) / kManifest).string();
}
}  // namespace

void write_latest(const std::string& dir, int64_t iteration, uint64_t save_id) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(manifest_file(dir, iteration)).parent_path(), ec);
  write_file_atomic(manifest_file(dir, iteration), fmt::format("{:016x}\n", save_id));
  write_file_atomic((std::filesystem::path(dir) / kLatest).string(), std::to_string(iteration) + "\n");
}

int64_t read_latest(const std::string& dir, uint64_t* save_id) {
  const std::string path = (std::filesystem::path(dir) / kLatest).string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) usage_error("--load {}: no checkpoint there ({} is missing)", dir, path);
  require_regular_file(path, fmt::format("--load {}:", dir));
  std::ifstream f(path);
  std::string text;
  std::getline(f, text);
  int64_t it = -1;
  try {
    size_t used = 0;
    it = std::stoll(text, &used);
    if (used != text.size()) it = -1;
  } catch (const std::exception&) {
  }
  if (it < 0) usage_error("--load {}: {} does not hold an iteration number ('{}')", dir, path, text);
  if (save_id) {
    const std::string m = manifest_file(dir, it);
    std::error_code ec;
    if (std::filesystem::exists(m, ec)) require_regular_file(m, fmt::format("--load {}:", dir));
    std::ifstream mf(m);
    std::string id;
    std::getline(mf, id);
    *save_id = 0;
    size_t used = 0;
    try {
      *save_id = std::stoull(id, &used, 16);
    } catch (const std::exception&) {
    }
    if (!mf.is_open())
      usage_error("--load {}: {} is missing: iteration {} was not saved whole (or by an older ptdp)", dir, m, it);
    if (*save_id == 0 || used != id.size() || id.size() != 16)
      usage_error("--load {}: {} does not hold a save id (16 hex digits): '{}'", dir, m, id);
  }
  return it;
}

CheckpointState load_shard(const std::string& dir, int64_t iteration, const CheckpointLayout& l,
                           const std::vector<Gpt*>& chunks, const std::vector<AdamW*>& opts, uint64_t save_id) {
  PTDP_CHECK(l.ffn_hidden > 0, "CheckpointLayout::ffn_hidden is not set");
  const std::string path = shard_file(dir, iteration, l);
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) require_regular_file(path, fmt::format("--load {}:", dir));
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    const std::string d = shard_dir(dir, iteration, l.tp_rank, l.pp_rank, l.pp);
    if (l.zero && std::filesystem::exists(std::filesystem::path(d) / kShardFile))
      usage_error("--load {}: the checkpoint was saved without --zero; this run has --zero {} (the optimizer state "
                  "is not resharded)", dir, l.zero);
    if (!l.zero && std::filesystem::exists(std::filesystem::path(d) / "zero_dp_rank_000.bin"))
      usage_error("--load {}: the checkpoint was saved with sharded optimizer state (--zero); this run has --zero 0 "
                  "(the optimizer state is not resharded)", dir);
    usage_error("--load {}: shard {} is missing (saved under another layout{}?)", dir, path,
                l.zero ? fmt::format(", or with fewer than d={} data-parallel ranks", l.dp) : std::string());
  }
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  Header h{};
  if (bytes.size() < sizeof h + sizeof(uint64_t)) usage_error("--load {}: {} is truncated", dir, path);
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) usage_error("--load {}: {} is not a ptdp checkpoint", dir, path);
  if (h.version != kVersion) usage_error("--load {}: {} has version {}, expected {}", dir, path, h.version, kVersion);
  uint64_t sum = 0;
  std::memcpy(&sum, bytes.data() + bytes.size() - sizeof sum, sizeof sum);
  if (fnv(bytes.substr(0, bytes.size() - sizeof sum)) != sum)
    usage_error("--load {}: {} is corrupt or truncated (checksum mismatch)", dir, path);
  if (h.arch != 0 && h.arch != 1) usage_error("--load {}: {} has an unknown architecture code {}", dir, path, h.arch);
  if (const std::string d = first_difference(layout_of(h), l); !d.empty())
    usage_error("--load {}: {} was saved with {}; the checkpoint was saved with {}; this run has {} (resharding is not "
                "supported)",
                dir, path, d, describe(layout_of(h)), describe(l));
  if (h.save_id != save_id)
    usage_error("--load {}: {} belongs to save {:016x}, not to save {:016x} that {} names: a shard of another run or "
                "a stale one left in the directory (a checkpoint is loaded whole or not at all)",
                dir, path, h.save_id, save_id, manifest_file(dir, iteration));
  if (h.chunks != static_cast<int32_t>(chunks.size()) || h.iteration != iteration)
    usage_error("--load {}: {} holds {} chunk(s) of iteration {}, expected {} of iteration {}", dir, path, h.chunks,
                h.iteration, chunks.size(), iteration);
  size_t pos = sizeof h;
  auto take = [&](void* dst, size_t n) {
    if (pos + n > bytes.size() - sizeof sum) usage_error("--load {}: {} is truncated", dir, path);
    std::memcpy(dst, bytes.data() + pos, n);
    pos += n;
  };
  for (size_t j = 0; j < chunks.size(); ++j) {
    int64_t n = 0, step = 0;
    take(&n, sizeof n);
    take(&step, sizeof step);
    if (n != opts[j]->state_numel())
      usage_error("--load {}: {} chunk {} has {} parameters, the model {}", dir, path, j, n, opts[j]->state_numel());
    Backend& be = chunks[j]->backend();
    Tensor master = Tensor::empty({n}, DType::F32);
    take(master.raw(), master.nbytes());
    for (Tensor* t : {&opts[j]->exp_avg(), &opts[j]->exp_avg_sq()}) {
      Tensor h = t->device() == Device::CPU ? *t : Tensor::empty(t->shape(), t->dtype());
      take(h.raw(), h.nbytes());
      if (h.raw() != t->raw()) be.copy(*t, h);
    }
    opts[j]->set_steps_taken(step);
    opts[j]->set_master_state(to_backend(be, master));
  }
  if (pos != bytes.size() - sizeof sum) usage_error("--load {}: {} has trailing bytes", dir, path);
  return {h.iteration, h.loss_scale, h.scale_growth, h.scale_hysteresis};
}

}  // namespace ptdp
