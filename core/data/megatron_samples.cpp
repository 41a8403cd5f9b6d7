#include "core/data/megatron_samples.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>

#include "core/common/error.h"
#include "core/common/temporary_files.h"
#include "core/data/dataset_digest.h"
#include "core/data/megatron_blend.h"
#include "core/data/megatron_description.h"
#include "core/data/npy_file.h"
#include "core/data/numpy_sum.h"

namespace ptdp {
namespace fs = std::filesystem;

struct MegatronSamples::Part {
  IndexedDataset ds;
  MegatronGptIndices indices;
  bool partial_last = false;  // the valid split's last, shorter sample is kept
};

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The index files of a description in `dir`, as PATH_BASE (DIR/HASH-CLASS-SPLIT, the files
// PATH_BASE-description.txt and PATH_BASE`suffixes`). First the name Megatron-core gives exactly
// this description (MD5); else any description in dir that names the same indices (Megatron's
// own, whose tokenizer ptdp does not know: same_indices). `usable` then checks the files against
// what the dataset gives now. Sets *found, or returns the MD5 name to build at.
std::string find_indices(const std::string& dir, const std::string& cls, MegatronSplit which,
                         const std::string& description, const std::vector<std::string>& suffixes,
                         const std::function<bool(const std::string&)>& usable, bool* found) {
  const std::string tail = fmt::format("-{}-{}", cls, megatron_split_name(which));
  const std::string own = fmt::format("{}/{}{}", dir, md5_hex(description), tail);
  const auto complete = [&](const std::string& base) {
    for (const auto& s : suffixes)
      if (!fs::exists(base + s)) return false;
    return true;
  };
  *found = true;
  const fs::path own_desc = own + "-description.txt";
  if (fs::exists(own_desc) && read_all(own_desc) == description && complete(own) && usable(own)) return own;
  const std::string suffix = tail + "-description.txt";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string path = entry.path().string();
    if (!entry.path().filename().string().ends_with(suffix)) continue;
    const std::string base = path.substr(0, path.size() - std::string_view("-description.txt").size());
    if (base != own && same_indices(read_all(path), description) && complete(base) && usable(base)) return base;
  }
  *found = false;
  return own;
}

// Writes a small file of the cache atomically (a temporary renamed into place).
void write_cache_text(const std::string& path, const std::string& text) {
  const std::string tmp = unique_temporary(path);
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    out.flush();
    if (!out) {
      const int err = errno;
      fs::remove(tmp);
      throw RuntimeError(fmt::format("{}: cannot write: {}", path, std::strerror(err)));
    }
  }
  fs::rename(tmp, path);
}

// ptdp's addition to the key of a GPTDataset's index files, kept beside them as
// PATH_BASE-ptdp-dataset.txt: the dataset's sequence count and the SHA-256 of its sequence lengths,
// which the indices depend on but Megatron-core's description does not name (a dataset rewritten
// under the same prefix with as many documents keeps its description and hash).
constexpr std::string_view kDatasetKeySuffix = "-ptdp-dataset.txt";
std::string dataset_key(const IndexedDataset& ds) {
  return fmt::format("sequences {}\nsequence_lengths_sha256 {}\n", ds.num_sequences(), sequence_lengths_digest(ds));
}

// Whether the index files at `base` fit the dataset as it is now: by ptdp's key where it was
// written, else (Megatron's own files, or ptdp's of an older version) by reading every sample's
// bounds against the sequence lengths.
bool fits_dataset(const std::string& base, const IndexedDataset& ds, const std::string& key, int seq_len,
                  bool partial_last) {
  const fs::path key_file = base + std::string(kDatasetKeySuffix);
  if (fs::exists(key_file)) return read_all(key_file) == key;
  try {
    return MegatronGptIndices::open(base).misfit(ds, seq_len, true, partial_last).empty();
  } catch (const UsageError&) {
    return false;
  }
}

// Whether index files hold what the plan derives from the dataset as it is now (a dataset
// rewritten under the same prefix leaves a description that still matches).
bool matches_plan(const std::string& base, const MegatronGptPlan& plan) {
  try {
    const auto idx = MegatronGptIndices::open(base);
    return idx.document_index().size() == plan.document_index_size && idx.num_samples() == plan.num_samples &&
           idx.sample_index().size() == 2 * (plan.num_samples + 1);
  } catch (const UsageError&) {
    return false;
  }
}

// Whether a file name is one of the index cache's: HASH-GPTDataset-SPLIT-*.npy, its description
// and ptdp's key; HASH-BlendedDataset-SPLIT-*.npy and its description.
bool is_cache_file_name(const std::string& name) {
  for (const char* suffix : {"-document_index.npy", "-sample_index.npy", "-shuffle_index.npy", "-dataset_index.npy",
                             "-dataset_sample_index.npy", "-description.txt", "-ptdp-dataset.txt"})
    if (name.ends_with(suffix))
      return name.find("-GPTDataset-") != std::string::npos || name.find("-BlendedDataset-") != std::string::npos;
  return false;
}

// The cache directory, made when missing; the temporaries that builds killed before their rename
// left there (their process gone) are removed.
std::string make_cache_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec && !fs::is_directory(dir)) usage_error("--data-cache-path {}: cannot create: {}", dir, ec.message());
  remove_dead_temporaries(dir, is_cache_file_name);
  return dir;
}

}  // namespace

MegatronSamples::MegatronSamples(const MegatronDataOptions& o) : SampleSource(o.seq_len) {
  const MegatronBlend blend = parse_megatron_blend(o.data);
  const auto split = parse_megatron_split(o.split);
  if (o.num_samples < 0) usage_error("{} samples asked of the {} split: must be >= 0", o.num_samples, megatron_split_name(o.which));

  const bool blended = blend.prefixes.size() > 1 || blend.weights.has_value();
  std::vector<double> weights;
  MegatronBlendPlan plan;
  if (blend.weights) {
    plan = plan_megatron_blend(*blend.weights, o.num_samples);
    weights = plan.weights;
  }
  std::vector<MegatronGptIdentity> ids;
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
    MegatronGptIdentity id;
    id.dataset_path = blend.prefixes[k];
    id.num_samples = p.num_samples;
    id.split = o.which;
    id.seed = o.seed;
    id.seq_len = o.seq_len;
    id.split_text = o.split;
    id.split_weights = split;
    const std::string description = megatron_gpt_description(id);
    ids.push_back(id);
    const MegatronGptPlan gpt = plan_megatron_gpt(ds, *range, p);
    // Megatron-core's default place: PREFIX/cache/GPTDataset_indices (gpt_dataset.py).
    const std::string dir = make_cache_dir(o.cache_dir.empty() ? blend.prefixes[k] + "/cache/GPTDataset_indices" : o.cache_dir);
    bool found = false;
    const std::string key = dataset_key(ds);
    const bool partial_last = !p.drop_last_partial_sequence;
    const std::string base = find_indices(
        dir, "GPTDataset", o.which, description, {"-document_index.npy", "-sample_index.npy", "-shuffle_index.npy"},
        [&](const std::string& b) { return matches_plan(b, gpt) && fits_dataset(b, ds, key, o.seq_len, partial_last); },
        &found);
    if (!found) {
      build_megatron_gpt_indices(ds, *range, p, base);
      write_cache_text(base + std::string(kDatasetKeySuffix), key);
      write_cache_text(base + "-description.txt", description);  // the last: it marks the files complete
    }
    auto part = std::make_unique<Part>(Part{std::move(ds), MegatronGptIndices::open(base), partial_last});
    MegatronDatasetUse use;
    use.prefix = blend.prefixes[k];
    use.samples_built = part->indices.num_samples();
    use.index_files = base;
    use.index_files_found = found;
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
    const std::string description = megatron_blend_description(ids, o.which, weights, size);
    const std::string dir =
        make_cache_dir(o.cache_dir.empty() ? blend.prefixes[0] + "/cache/BlendedDataset_indices" : o.cache_dir);
    const auto sized = [&](const std::string& b) {
      try {
        return NpyArray::open(b + "-dataset_index.npy").size() == size &&
               NpyArray::open(b + "-dataset_sample_index.npy").size() == size;
      } catch (const UsageError&) {
        return false;
      }
    };
    bool found = false;
    const std::string base = find_indices(dir, "BlendedDataset", o.which, description,
                                          {"-dataset_index.npy", "-dataset_sample_index.npy"}, sized, &found);
    if (!found) {
      build_megatron_blending_indices(weights, size, base);
      write_cache_text(base + "-description.txt", description);
    }
    blend_index_files_ = base;
    dataset_index_ = std::make_unique<NpyArray>(NpyArray::open(base + "-dataset_index.npy"));
    dataset_sample_index_ = std::make_unique<NpyArray>(NpyArray::open(base + "-dataset_sample_index.npy"));
    // What each dataset gives: its last draw is the largest sample index asked of it.
    std::vector<int64_t> drawn(uses_.size(), 0);
    for (int64_t i = 0; i < size; ++i) {
      const int64_t d = dataset_index_->at(i);
      if (d < 0 || d >= static_cast<int64_t>(uses_.size()))
        usage_error("{}: item {} names dataset {} of {}", dataset_index_->path(), i, d, uses_.size());
      const int64_t k = dataset_sample_index_->at(i);
      if (k < 0)
        usage_error("{}: item {} names sample {} of {}: a sample index is never negative (the file was altered?)",
                    dataset_sample_index_->path(), i, k, uses_[d].prefix);
      drawn[d] = std::max(drawn[d], k + 1);
    }
    for (size_t k = 0; k < uses_.size(); ++k) {
      if (drawn[k] > uses_[k].samples_built)
        usage_error("{}: the {} blend asks {} samples of {}, which has {} (Megatron's mid_level_dataset_surplus is too "
                    "small for this blend, or the file was altered)",
                    dataset_sample_index_->path(), megatron_split_name(o.which), drawn[k], uses_[k].prefix,
                    uses_[k].samples_built);
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
  parts_[d]->indices.read_sample(parts_[d]->ds, j, seq_len(), true, out, parts_[d]->partial_last);
}

}  // namespace ptdp
