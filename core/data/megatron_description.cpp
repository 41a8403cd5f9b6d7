#include "core/data/megatron_description.h"

#include <openssl/evp.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/common/error.h"

namespace ptdp {
namespace {

using Json = nlohmann::ordered_json;

// Python's json.dumps(obj, indent=4) with its default ensure_ascii: nlohmann's dump with the same
// indent and ASCII escapes gives the same separators, the same shortest round-trip floats (1.0,
// 0.9989999999999999, 1e-05) and the same \uXXXX escapes.
std::string python_dumps(const Json& j) { return j.dump(4, ' ', true); }

Json parse_tokenizer(std::string_view text) {
  Json t = Json::parse(text, nullptr, false);
  if (t.is_discarded()) usage_error("tokenizer description '{}' is not JSON", text);
  return t;
}

// convert_split_vector_to_split_matrix(split): each split's bookends (lo, hi), None where empty.
// The first bookend starts at Python's integer 0, the others at float sums.
Json split_matrix(const std::array<double, 3>& w) {
  Json m = Json::array();
  double lo = 0.0;
  for (int k = 0; k < 3; ++k) {
    const double hi = lo + w[k];
    if (hi <= lo) m.push_back(nullptr);
    else if (k == 0) m.push_back(Json::array({0, hi}));
    else m.push_back(Json::array({lo, hi}));
    lo = hi;
  }
  return m;
}

Json gpt_identifiers(const MegatronGptIdentity& id, const Json& tokenizer) {
  Json j = Json::object();
  j["class"] = "GPTDataset";
  j["dataset_path"] = id.dataset_path;
  j["num_samples"] = id.num_samples ? Json(*id.num_samples) : Json(nullptr);
  j["index_split"] = megatron_split_name(id.split);
  j["random_seed"] = id.seed;
  j["sequence_length"] = id.seq_len;
  j["split"] = id.split_text;
  j["split_matrix"] = split_matrix(id.split_weights);
  j["tokenizer"] = tokenizer;
  return j;
}

bool same_dataset_path(const Json& a, const Json& b) {
  if (!a.is_string() || !b.is_string()) return false;
  if (a == b) return true;
  std::error_code ec;
  const bool same = std::filesystem::equivalent(a.get<std::string>() + ".idx", b.get<std::string>() + ".idx", ec);
  return !ec && same;
}

bool same_identifiers(const Json& a, const Json& b) {
  if (!a.is_object() || !b.is_object() || !a.contains("class") || a["class"] != b.value("class", Json())) return false;
  if (a["class"] == "BlendedDataset") {
    for (const char* k : {"split", "weights", "size"})
      if (!a.contains(k) || !b.contains(k) || a[k] != b[k]) return false;
    const Json& da = a.value("datasets", Json());
    const Json& db = b.value("datasets", Json());
    if (!da.is_array() || !db.is_array() || da.size() != db.size()) return false;
    for (size_t i = 0; i < da.size(); ++i)
      if (!same_identifiers(da[i], db[i])) return false;
    return true;
  }
  for (const char* k : {"num_samples", "index_split", "random_seed", "sequence_length", "split_matrix"})
    if (!a.contains(k) || !b.contains(k) || a[k] != b[k]) return false;
  return same_dataset_path(a.value("dataset_path", Json()), b.value("dataset_path", Json()));
}

}  // namespace

std::string megatron_gpt_description(const MegatronGptIdentity& id, std::string_view tokenizer_json) {
  return python_dumps(gpt_identifiers(id, parse_tokenizer(tokenizer_json)));
}

std::string megatron_blend_description(const std::vector<MegatronGptIdentity>& datasets, MegatronSplit split,
                                       const std::vector<double>& weights, int64_t size,
                                       std::string_view tokenizer_json) {
  const Json tokenizer = parse_tokenizer(tokenizer_json);
  Json j = Json::object();
  j["class"] = "BlendedDataset";
  j["datasets"] = Json::array();
  for (const auto& d : datasets) j["datasets"].push_back(gpt_identifiers(d, tokenizer));
  j["split"] = megatron_split_name(split);
  j["weights"] = weights;
  j["size"] = size;
  return python_dumps(j);
}

std::string md5_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  PTDP_CHECK(EVP_Digest(bytes.data(), bytes.size(), digest, &n, EVP_md5(), nullptr) == 1, "OpenSSL's MD5 failed");
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

bool same_indices(std::string_view theirs, std::string_view ours) {
  const Json a = Json::parse(theirs, nullptr, false);
  const Json b = Json::parse(ours, nullptr, false);
  return !a.is_discarded() && !b.is_discarded() && same_identifiers(a, b);
}

}  // namespace ptdp
