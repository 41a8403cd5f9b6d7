#include "core/data/dataset_digest.h"

#include <openssl/evp.h>

#include <memory>
#include <span>

#include <fmt/format.h>

#include "core/common/error.h"

namespace ptdp {
namespace {

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    PTDP_CHECK(ctx_ && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1, "OpenSSL's SHA-256 failed");
  }
  Sha256& add(std::span<const std::byte> b) {
    PTDP_CHECK(EVP_DigestUpdate(ctx_.get(), b.data(), b.size()) == 1, "OpenSSL's SHA-256 failed");
    return *this;
  }
  Sha256& add(const std::string& s) { return add(std::as_bytes(std::span<const char>(s))); }
  std::string hex() {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    PTDP_CHECK(EVP_DigestFinal_ex(ctx_.get(), d, &n) == 1, "OpenSSL's SHA-256 failed");
    std::string out;
    for (unsigned int i = 0; i < n; ++i) out += fmt::format("{:02x}", d[i]);
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

}  // namespace

std::string sequence_lengths_digest(const IndexedDataset& ds) {
  return Sha256().add(ds.sequence_lengths_bytes()).hex();
}

std::string dataset_content_digest(const IndexedDataset& ds) {
  Sha256 h;
  h.add(fmt::format("idx {}\n", ds.idx_bytes().size())).add(ds.idx_bytes());
  const auto bin = ds.bin_bytes();
  h.add(fmt::format("bin {}\n", bin.size()));
  if (bin.size() <= kWholeBinBytes) return h.add(bin).hex();
  const size_t last = bin.size() - kBinBlockBytes;
  for (size_t k = 0; k < kBinSamples; ++k) h.add(bin.subspan(last * k / (kBinSamples - 1), kBinBlockBytes));
  return h.hex();
}

}  // namespace ptdp
