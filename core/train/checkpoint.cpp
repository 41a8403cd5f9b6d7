#include "core/train/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>
#include <string_view>
#include <type_traits>
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
// and the MLP hidden size; 5: the gradient bucket size of --zero 1 and the save id; 6: the query
// groups; 7: the norm epsilon and the rotary base; 8: the layers of the first and last pipeline
// stage; 9: the header as named settings ("name=value" lines), so that a setting recorded anew
// needs no new version (docs/PYTORCH.md, "Checkpoint shard format").
constexpr uint32_t kVersion = 9;
const char* kLatest = kLatestCheckpointFile;
const char* kShardFile = "model_optim_rng.bin";
const char* kManifest = "save_id.txt";
constexpr uint32_t kMaxHeaderBytes = 1 << 20;

using Settings = std::vector<std::pair<std::string, std::string>>;

uint64_t fnv(std::string_view bytes) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

void put(std::string& out, const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
template <class T> void put(std::string& out, const T& v) { put(out, &v, sizeof v); }

// The names of the shard's own state in its header, before the layout's settings.
const std::vector<std::string>& state_names() {
  static const std::vector<std::string> n = {"iteration", "chunks", "loss_scale", "scale_growth", "scale_hysteresis",
                                             "save_id", "chunk_layers"};
  return n;
}

// The shard's header: its state, then the layout's settings, one "name=value" line each. The
// state ends with the layers of each chunk ("chunk_layers=0-2,4-6": [begin, end) ranges), so that a
// reader gathers the shards of a pipeline without placing the layers itself.
std::string header_text(const CheckpointLayout& l, const CheckpointState& st, const std::vector<Gpt*>& chunks) {
  std::string layers;
  for (const Gpt* g : chunks)
    layers += fmt::format("{}{}-{}", layers.empty() ? "" : ",", g->shard().layer_begin, g->shard().layer_end);
  std::string t = fmt::format("iteration={}\nchunks={}\nloss_scale={}\nscale_growth={}\nscale_hysteresis={}\n"
                              "save_id={:016x}\nchunk_layers={}\n",
                              st.iteration, chunks.size(), st.loss_scale, st.scale_growth, st.scale_hysteresis,
                              st.save_id, layers);
  for (const RecordedSetting& s : l.settings) {
    PTDP_CHECK(s.value.find('\n') == std::string::npos, "checkpoint setting {} holds a line break", s.name);
    t += s.name + "=" + s.value + "\n";
  }
  return t;
}

// The settings of a header's text, in order; UsageError naming the file for a malformed one.
Settings parse_header(const std::string& text, const std::string& where) {
  Settings out;
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\n', at);
    const size_t eq = text.find('=', at);
    if (end == std::string::npos || eq == std::string::npos || eq > end || eq == at)
      usage_error("{}: a malformed header line at byte {}", where, at);
    out.emplace_back(text.substr(at, eq - at), text.substr(eq + 1, end - eq - 1));
    at = end + 1;
  }
  return out;
}

const std::string* find(const Settings& kv, std::string_view name) {
  for (const auto& [k, v] : kv)
    if (k == name) return &v;
  return nullptr;
}

// "--tp 1 --pp 2 --vpp 1 (layers per stage 3 | 5) --zero 0, --arch gpt l=8 h=64 ..., seed S, global
// batch B": the layout a refusal shows whole ('?' for a setting the shard does not record).
std::string describe(const Settings& kv) {
  auto v = [&](std::string_view name) {
    const std::string* x = find(kv, name);
    return x ? *x : std::string("?");
  };
  const std::string zero = v("zero");
  return fmt::format("--tp {} --pp {} --vpp {}{}{}, --arch {} l={} h={} a={} g={} ffn={} s={} V={} eps={} theta={}, "
                     "seed {}, global batch {}",
                     v("tp"), v("pp"), v("vpp"), v("pp") != "1" ? " (layers per stage " + v("stage_layers") + ")" : "",
                     zero == "0" ? std::string(" --zero 0")
                                 : fmt::format(" --zero {} on d={}{}", zero, v("dp"),
                                               zero == "1" ? " --grad-bucket-size " + v("grad_bucket_size") : ""),
                     v("arch"), v("layers"), v("hidden"), v("heads"), v("query_groups"), v("ffn_hidden_size"),
                     v("seq_length"), v("vocab_size"), v("norm_eps"), v("rope_theta"), v("seed"), v("global_batch"));
}

Settings as_pairs(const CheckpointLayout& l) {
  Settings kv;
  for (const RecordedSetting& s : l.settings) kv.emplace_back(s.name, s.value);
  return kv;
}

// The first setting in which the shard's `saved` and the run's `l` differ: "LABEL SAVED, this run
// has LABEL RUN"; empty when they agree. A setting the shard does not record (it was saved before
// that setting was recorded) stands for the field's default, the only value it could have had; a
// setting this run does not record is named.
std::string first_difference(const Settings& saved, const CheckpointLayout& l) {
  static const RunConfig defaults;
  for (const RecordedSetting& s : l.settings) {
    if (s.check != ResumeCheck::Layout) continue;  // resume_config's (checkpoint_resume.h)
    const std::string* was = find(saved, s.name);
    std::optional<std::string> old = was ? std::optional(*was) : std::nullopt;
    if (!old)
      if (const Field* f = find_field(s.name)) old = f->checkpoint_text(defaults);
    if (!old) return fmt::format("no {}, this run has {} {}", s.label, s.label, s.value);
    if (*old != s.value) return fmt::format("{} {}, this run has {} {}", s.label, *old, s.label, s.value);
  }
  for (const auto& [name, value] : saved) {
    bool known = std::find(state_names().begin(), state_names().end(), name) != state_names().end();
    for (const RecordedSetting& s : l.settings) known = known || s.name == name;
    const Field* f = find_field(name);
    known = known || (f && f->in_checkpoint() && f->resume_check() != ResumeCheck::Layout);
    if (!known) {
      return fmt::format("{} {}, which this run does not record{}", f ? f->checkpoint_label() : name, value,
                         f ? std::string() : " (a setting of a newer ptdp)");
    }
  }
  return "";
}

// A number of the header's state, or a UsageError naming the file.
template <class T>
T header_number(const Settings& kv, std::string_view name, const std::string& where) {
  const std::string* v = find(kv, name);
  T x{};
  std::from_chars_result r{};
  if (v) {
    const char *b = v->data(), *e = v->data() + v->size();
    if constexpr (std::is_integral_v<T>) r = std::from_chars(b, e, x, name == "save_id" ? 16 : 10);
    else r = std::from_chars(b, e, x);
  }
  if (!v || v->empty() || r.ec != std::errc() || r.ptr != v->data() + v->size())
    usage_error("{}: the header's {} is {}", where, name, v ? "'" + *v + "', not a number" : "missing");
  return x;
}

// The file of this rank: one per (tensor, pipeline) rank, or per data-parallel rank too.
std::string shard_file(const std::string& dir, int64_t iteration, const CheckpointLayout& l) {
  return (std::filesystem::path(shard_dir(dir, iteration, l.tp_rank, l.pp_rank, l.pp)) /
          (l.zero ? fmt::format("zero_dp_rank_{:03d}.bin", l.dp_rank) : std::string(kShardFile)))
      .string();
}

}  // namespace

CheckpointLayout checkpoint_layout(const RunConfig& c, int tp_rank, int pp_rank, int dp_rank) {
  CheckpointLayout l;
  l.settings = checkpoint_settings(c);
  // The layers each stage holds as placed ("3 | 5", "2 | 3 x 4 | 2"): an even split spelt so too.
  const LayerSplit split = c.par.layer_split(c.model.layers);
  std::string stages = describe_stages(split);
  if (stages.empty())
    stages = describe_stages({split.layers, split.p, split.v, stage_layer_count(split, 0),
                              stage_layer_count(split, split.p - 1)});
  l.settings.push_back({"stage_layers",
                        "layers per stage (--decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers)",
                        c.par.pp == 1 ? std::to_string(c.model.layers) : stages});
  l.settings.push_back({"tp_rank", "tensor-parallel rank", std::to_string(tp_rank)});
  l.settings.push_back({"pp_rank", "pipeline rank", std::to_string(pp_rank)});
  if (c.par.zero > 0) l.settings.push_back({"dp_rank", "data-parallel rank", std::to_string(dp_rank)});
  l.tp_rank = tp_rank, l.pp_rank = pp_rank, l.pp = c.par.pp;
  l.zero = c.par.zero, l.dp = c.par.dp * c.par.cp, l.dp_rank = c.par.zero > 0 ? dp_rank : 0;
  return l;
}

std::string shard_dir(const std::string& dir, int64_t iteration, int tp_rank, int pp_rank, int pp) {
  std::string rank = pp > 1 ? fmt::format("mp_rank_{:02d}_{:03d}", tp_rank, pp_rank) : fmt::format("mp_rank_{:02d}", tp_rank);
  return (std::filesystem::path(dir) / fmt::format("iter_{:07d}", iteration) / rank).string();
}

void save_shard(const std::string& dir, const CheckpointLayout& l, const CheckpointState& state,
                const std::vector<Gpt*>& chunks, const std::vector<AdamW*>& opts) {
  PTDP_CHECK(chunks.size() == opts.size(), "one optimizer per chunk");
  const std::string text = header_text(l, state, chunks);
  std::string out(kMagic, sizeof kMagic);
  put(out, kVersion);
  put(out, static_cast<uint32_t>(text.size()));
  out += text;
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

std::optional<std::vector<std::pair<std::string, std::string>>> recorded_settings(const std::string& dir,
                                                                                  int64_t iteration,
                                                                                  const CheckpointLayout& l) {
  const std::string path = shard_file(dir, iteration, l);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  // The header alone (a shard can be gigabytes): magic, version, size, text. Whatever is wrong
  // with the file is load_shard's to name, after its checksum.
  std::ifstream f(path, std::ios::binary);
  char head[16] = {};
  uint32_t version = 0, text_bytes = 0;
  if (!f.read(head, sizeof head) || std::memcmp(head, kMagic, sizeof kMagic) != 0) return std::nullopt;
  std::memcpy(&version, head + 8, sizeof version);
  std::memcpy(&text_bytes, head + 12, sizeof text_bytes);
  if (version != kVersion || text_bytes > kMaxHeaderBytes) return std::nullopt;
  std::string text(text_bytes, '\0');
  if (!f.read(text.data(), text_bytes)) return std::nullopt;
  return parse_header(text, fmt::format("--load {}: {}", dir, path));
}

CheckpointState load_shard(const std::string& dir, int64_t iteration, const CheckpointLayout& l,
                           const std::vector<Gpt*>& chunks, const std::vector<AdamW*>& opts, uint64_t save_id) {
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
  const std::string where = fmt::format("--load {}: {}", dir, path);
  uint32_t version = 0, text_bytes = 0;
  if (bytes.size() < sizeof kMagic + 8 + sizeof(uint64_t)) usage_error("{} is truncated", where);
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) usage_error("{} is not a ptdp checkpoint", where);
  std::memcpy(&version, bytes.data() + 8, sizeof version);
  if (version != kVersion) usage_error("{} has version {}, expected {}", where, version, kVersion);
  uint64_t sum = 0;
  std::memcpy(&sum, bytes.data() + bytes.size() - sizeof sum, sizeof sum);
  if (fnv(std::string_view(bytes).substr(0, bytes.size() - sizeof sum)) != sum)
    usage_error("{} is corrupt or truncated (checksum mismatch)", where);
  std::memcpy(&text_bytes, bytes.data() + 12, sizeof text_bytes);
  size_t pos = 16 + size_t(text_bytes);
  if (text_bytes > kMaxHeaderBytes || pos > bytes.size() - sizeof sum) usage_error("{} is truncated", where);
  const Settings saved = parse_header(bytes.substr(16, text_bytes), where);
  if (const std::string d = first_difference(saved, l); !d.empty())
    usage_error("{} was saved with {}; the checkpoint was saved with {}; this run has {} (resharding is not "
                "supported)",
                where, d, describe(saved), describe(as_pairs(l)));
  const auto save = header_number<uint64_t>(saved, "save_id", where);
  if (save != save_id)
    usage_error("{} belongs to save {:016x}, not to save {:016x} that {} names: a shard of another run or a stale one "
                "left in the directory (a checkpoint is loaded whole or not at all)",
                where, save, save_id, manifest_file(dir, iteration));
  const CheckpointState state{header_number<int64_t>(saved, "iteration", where),
                              header_number<double>(saved, "loss_scale", where),
                              header_number<int32_t>(saved, "scale_growth", where),
                              header_number<int32_t>(saved, "scale_hysteresis", where), save};
  const auto nchunks = header_number<int64_t>(saved, "chunks", where);
  if (nchunks != static_cast<int64_t>(chunks.size()) || state.iteration != iteration)
    usage_error("{} holds {} chunk(s) of iteration {}, expected {} of iteration {}", where, nchunks, state.iteration,
                chunks.size(), iteration);

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
  return state;
}

}  // namespace ptdp
