#include "core/data/megatron_samples.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/common/error.h"
#include "core/data/megatron_blend.h"
#include "core/data/npy_file.h"
#include "core/data/numpy_sum.h"

namespace ptdp {
namespace fs = std::filesystem;

struct MegatronSamples::Part {
  IndexedDataset ds;
  MegatronGptIndices indices;
};

namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// PATH_BASE for a description: DIR/HASH-CLASS-SPLIT, with PATH_BASE-description.txt holding it.
// Returns whether the files `suffixes` are all there for exactly this description.
bool cached(const std::string& dir, const std::string& cls, MegatronSplit which, const std::string& description,
            const std::vector<std::string>& suffixes, std::string* path_base) {
  *path_base = fmt::format("{}/{:016x}-{}-{}", dir, fnv1a(description), cls, megatron_split_name(which));
  const fs::path desc = *path_base + "-description.txt";
  if (!fs::exists(desc) || read_all(desc) != description) return false;
  for (const auto& s : suffixes)
    if (!fs::exists(*path_base + s)) return false;
  return true;
}

void write_description(const std::string& path_base, const std::string& description) {
  const std::string tmp = unique_temporary(path_base + "-description.txt");
  {
    std::ofstream out(tmp, std::ios::binary);
    out << description;
    if (!out) usage_error("{}: cannot write", tmp);
  }
  fs::rename(tmp, path_base + "-description.txt");
}

std::string dataset_identity(const IndexedDataset& ds) {
  std::error_code ec;
  const auto idx_time = fs::last_write_time(ds.idx_path(), ec).time_since_epoch().count();
  const auto bin_time = fs::last_write_time(ds.bin_path(), ec).time_since_epoch().count();
  return fmt::format("prefix={}\nsequences={}\ntokens={}\nidx_mtime={}\nbin_mtime={}\n",
                     fs::absolute(ds.prefix()).string(), ds.num_sequences(), ds.total_tokens(), idx_time, bin_time);
}

}  // namespace

MegatronSamples::MegatronSamples(const MegatronDataOptions& o) : SampleSource(o.seq_len) {
  const MegatronBlend blend = parse_megatron_blend(o.data);
  const auto split = parse_megatron_split(o.split);
  if (o.cache_dir.empty()) usage_error("--data-cache: Megatron's sample order needs a directory for its index files");
  std::error_code ec;
  fs::create_directories(o.cache_dir, ec);
  if (ec && !fs::is_directory(o.cache_dir)) usage_error("--data-cache {}: cannot create: {}", o.cache_dir, ec.message());
  if (o.num_samples < 0) usage_error("{} samples asked of the {} split: must be >= 0", o.num_samples, megatron_split_name(o.which));

  const bool blended = blend.prefixes.size() > 1 || blend.weights.has_value();
  std::vector<double> weights;
  MegatronBlendPlan plan;
  if (blend.weights) {
    plan = plan_megatron_blend(*blend.weights, o.num_samples);
    weights = plan.weights;
  }
  for (size_t k = 0; k < blend.prefixes.size(); ++k) {
    IndexedDataset ds = IndexedDataset::open(blend.prefixes[k]);
    const auto range = megatron_split_range(split, o.which, ds.num_sequences());
    if (!range)
      usage_error("--split {}: gives the {} split no share, but {} samples are asked of it", o.split,
                  megatron_split_name(o.which), o.num_samples);
    if (range->begin == range->end)
      usage_error("--split {}: the {} split of {} holds no documents (its share of the {} rounds to none)", o.split,
                  megatron_split_name(o.which), blend.prefixes[k], ds.num_sequences());
    MegatronGptParams p;
    p.seq_len = o.seq_len;
    p.seed = o.seed;
    p.drop_last_partial_sequence = o.which != MegatronSplit::Valid || o.drop_last_partial_validation_sequence;
    if (!blended) p.num_samples = o.num_samples;
    else if (blend.weights) p.num_samples = plan.built_samples[k];  // else one epoch (None)
    const std::string description = fmt::format(
        "ptdp megatron GPTDataset 1\n{}range={},{}\nnum_samples={}\nseq_len={}\nseed={}\nextra=1\ndrop_last={}\n",
        dataset_identity(ds), range->begin, range->end, p.num_samples ? std::to_string(*p.num_samples) : "None",
        p.seq_len, p.seed, int(p.drop_last_partial_sequence));
    std::string base;
    const MegatronGptPlan gpt = plan_megatron_gpt(ds, *range, p);
    if (!cached(o.cache_dir, "GPTDataset", o.which, description,
                {"-document_index.npy", "-sample_index.npy", "-shuffle_index.npy"}, &base)) {
      build_megatron_gpt_indices(ds, *range, p, base);
      write_description(base, description);
    }
    auto part = std::make_unique<Part>(Part{std::move(ds), MegatronGptIndices::open(base)});
    MegatronDatasetUse use;
    use.prefix = blend.prefixes[k];
    use.samples_built = part->indices.num_samples();
    use.tokens_per_epoch = gpt.tokens_per_epoch;
    use.num_epochs = gpt.num_epochs;
    uses_.push_back(use);
    parts_.push_back(std::move(part));
  }

  if (!blended) {
    num_samples_ = parts_[0]->indices.num_samples();
    uses_[0].samples_drawn = std::min(num_samples_, o.num_samples);
  } else {
    int64_t size = plan.size;
    if (!blend.weights) {  // blended in proportion to the datasets' lengths
      std::vector<double> lengths;
      int64_t total = 0;
      for (const auto& u : uses_) {
        lengths.push_back(static_cast<double>(u.samples_built));
        total += u.samples_built;
      }
      weights = numpy_normalize(lengths);
      size = std::min(o.num_samples, total);
    }
    std::string description = fmt::format("ptdp megatron BlendedDataset 1\nsize={}\n", size);
    for (size_t k = 0; k < uses_.size(); ++k)
      description += fmt::format("weight={:a} dataset={}\n", weights[k], fs::absolute(uses_[k].prefix).string());
    std::string base;
    if (!cached(o.cache_dir, "BlendedDataset", o.which, description, {"-dataset_index.npy", "-dataset_sample_index.npy"},
                &base)) {
      build_megatron_blending_indices(weights, size, base);
      write_description(base, description);
    }
    dataset_index_ = std::make_unique<NpyArray>(NpyArray::open(base + "-dataset_index.npy"));
    dataset_sample_index_ = std::make_unique<NpyArray>(NpyArray::open(base + "-dataset_sample_index.npy"));
    if (dataset_index_->size() != size || dataset_sample_index_->size() != size)
      usage_error("{}-dataset_index.npy: {} samples, expected {}", base, dataset_index_->size(), size);
    // What each dataset gives: its last draw is the largest sample index asked of it.
    std::vector<int64_t> drawn(uses_.size(), 0);
    for (int64_t i = 0; i < size; ++i) {
      const int64_t d = dataset_index_->at(i);
      if (d < 0 || d >= static_cast<int64_t>(uses_.size()))
        usage_error("{}: item {} names dataset {} of {}", dataset_index_->path(), i, d, uses_.size());
      drawn[d] = std::max(drawn[d], dataset_sample_index_->at(i) + 1);
    }
    for (size_t k = 0; k < uses_.size(); ++k) {
      if (drawn[k] > uses_[k].samples_built)
        usage_error("the {} blend asks {} samples of {}, which has {} (Megatron's mid_level_dataset_surplus is too small "
                    "for this blend)",
                    megatron_split_name(o.which), drawn[k], uses_[k].prefix, uses_[k].samples_built);
      uses_[k].samples_drawn = drawn[k];
      uses_[k].weight = weights[k];
    }
    num_samples_ = size;
  }
  for (auto& u : uses_)
    u.epochs_drawn = u.tokens_per_epoch > 0 ? static_cast<double>(u.samples_drawn) * o.seq_len / u.tokens_per_epoch : 0;
}

MegatronSamples::~MegatronSamples() = default;

void MegatronSamples::get(int64_t sample_index, int32_t* out) const {
  if (sample_index < 0 || sample_index >= num_samples_)
    usage_error("sample {} is past the {} samples of Megatron's order built for this run", sample_index, num_samples_);
  size_t d = 0;
  int64_t j = sample_index;
  if (dataset_index_) {
    d = static_cast<size_t>(dataset_index_->at(sample_index));
    j = dataset_sample_index_->at(sample_index);
  }
  parts_[d]->indices.read_sample(parts_[d]->ds, j, seq_len(), true, out);
}

}  // namespace ptdp
