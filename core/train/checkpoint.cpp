#include "core/train/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/results/results_csv.h"

namespace ptdp {

namespace {

constexpr char kMagic[8] = {'P', 'T', 'D', 'P', 'C', 'K', 'P', 'T'};
// 2: loss scaler trackers, f32 master weights; 3: sharded optimizer state; 4: the architecture
// (0 gpt, 1 llama) and the MLP hidden size.
constexpr uint32_t kVersion = 4;
const char* kLatest = "latest_checkpointed_iteration.txt";
const char* kShardFile = "model_optim_rng.bin";

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
};
static_assert(sizeof(Header) == 120, "docs/PYTORCH.md documents the header, scripts/ptdp_checkpoint.py reads it");

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

std::string describe(const CheckpointLayout& l) {
  return fmt::format("--tp {} --pp {} --vpp {}{}, --arch {} l={} h={} a={} ffn={} s={} V={}, seed {}, global batch {}",
                     l.tp, l.pp, l.vpp,
                     l.zero ? fmt::format(" --zero {} on d={}", l.zero, l.dp) : std::string(" --zero 0"),
                     arch_name(l.arch), l.layers, l.hidden, l.heads, l.ffn_hidden, l.seq_length, l.vocab_size, l.seed,
                     l.global_batch);
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
  return l;
}

bool same(const CheckpointLayout& a, const CheckpointLayout& b) {
  return a.tp == b.tp && a.pp == b.pp && a.vpp == b.vpp && a.tp_rank == b.tp_rank && a.pp_rank == b.pp_rank &&
         a.layers == b.layers && a.hidden == b.hidden && a.heads == b.heads && a.seq_length == b.seq_length &&
         a.vocab_size == b.vocab_size && a.seed == b.seed && a.global_batch == b.global_batch && a.zero == b.zero &&
         (a.zero == 0 || (a.dp == b.dp && a.dp_rank == b.dp_rank)) && a.arch == b.arch && a.ffn_hidden == b.ffn_hidden;
}

}  // namespace

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

void write_latest(const std::string& dir, int64_t iteration) {
  write_file_atomic((std::filesystem::path(dir) / kLatest).string(), std::to_string(iteration) + "\n");
}

int64_t read_latest(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kLatest).string();
  std::ifstream f(path);
  if (!f) usage_error("--load {}: no checkpoint there ({} is missing)", dir, path);
  std::string text;
  std::getline(f, text);
  try {
    size_t used = 0;
    int64_t it = std::stoll(text, &used);
    if (used == text.size() && it >= 0) return it;
  } catch (const std::exception&) {
  }
  usage_error("--load {}: {} does not hold an iteration number ('{}')", dir, path, text);
}

CheckpointState load_shard(const std::string& dir, int64_t iteration, const CheckpointLayout& l,
                           const std::vector<Gpt*>& chunks, const std::vector<AdamW*>& opts) {
  PTDP_CHECK(l.ffn_hidden > 0, "CheckpointLayout::ffn_hidden is not set");
  const std::string path = shard_file(dir, iteration, l);
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
  if (!same(layout_of(h), l))
    usage_error("--load {}: the checkpoint was saved with {}; this run has {} (resharding is not supported)", dir,
                describe(layout_of(h)), describe(l));
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
