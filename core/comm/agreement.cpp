#include "core/comm/agreement.h"

#include <fmt/format.h>

#include "core/common/error.h"

namespace ptdp {

namespace {

constexpr size_t kMaxMessage = 4000;  // characters of a failing rank's message that travel

// A failure of this rank: 0 none, 1 a failure, 2 bad input (UsageError).
struct LocalFailure {
  int32_t code = 0;
  std::string what;
};

LocalFailure describe(const std::exception_ptr& failure) {
  if (!failure) return {};
  try {
    std::rethrow_exception(failure);
  } catch (const AgreedError& e) {  // agreed already (a nested phase): keep its kind
    return {e.usage() ? 2 : 1, e.what()};
  } catch (const UsageError& e) {
    return {2, e.what()};
  } catch (const std::exception& e) {
    return {1, e.what()};
  } catch (...) {
    return {1, "unknown error"};
  }
}

// One int32 per rank, gathered on every rank.
std::vector<int32_t> all_gather_one(Communicator& world, int32_t v) {
  Tensor in = Tensor::empty({1}, DType::I32), out = Tensor::empty({world.size()}, DType::I32);
  in.data<int32_t>()[0] = v;
  world.all_gather(in, out);
  return std::vector<int32_t>(out.data<int32_t>(), out.data<int32_t>() + world.size());
}

// root's string on every rank (a collective).
std::string broadcast_string(Communicator& world, const std::string& s, int root) {
  Tensor len = Tensor::empty({1}, DType::I32);
  len.data<int32_t>()[0] = int32_t(std::min(s.size(), kMaxMessage));
  world.broadcast(len, root);
  const int32_t n = len.data<int32_t>()[0];
  if (n <= 0) return {};
  Tensor chars = Tensor::empty({n}, DType::I32);
  if (world.rank() == root)
    for (int32_t i = 0; i < n; ++i) chars.data<int32_t>()[i] = static_cast<unsigned char>(s[i]);
  world.broadcast(chars, root);
  std::string out(size_t(n), '\0');
  for (int32_t i = 0; i < n; ++i) out[i] = char(chars.data<int32_t>()[i]);
  return out;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;  // the offset basis
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 0x100000001b3ull;  // the FNV prime
  }
  return h;
}

void agree_on(Communicator& world, std::exception_ptr failure) {
  const LocalFailure mine = describe(failure);
  const std::vector<int32_t> codes = all_gather_one(world, mine.code);
  std::vector<int> failed;
  for (int r = 0; r < world.size(); ++r)
    if (codes[r] != 0) failed.push_back(r);
  if (failed.empty()) return;
  const int first = failed.front();
  const std::string cause = broadcast_string(world, mine.what, first);
  std::string where;
  if (world.size() == 1)
    where.clear();
  else if (int(failed.size()) == world.size())
    where = fmt::format(" (on all {} ranks)", world.size());
  else if (failed.size() == 1)
    where = fmt::format(" (rank {} of {})", first, world.size());
  else
    where = fmt::format(" (ranks {} of {})", rank_list(failed), world.size());
  throw AgreedError(codes[first] == 2, first, cause + where);
}

void agree(Communicator& world, const std::function<void()>& fn) {
  std::exception_ptr failure;
  try {
    fn();
  } catch (...) {
    failure = std::current_exception();
  }
  agree_on(world, failure);
}

void require_same_fields(Communicator& world, const std::vector<std::pair<std::string, std::string>>& fields,
                         const std::string& hint) {
  const int n = world.size();
  const std::vector<int32_t> counts = all_gather_one(world, int32_t(fields.size()));
  for (int r = 1; r < n; ++r)
    if (counts[r] != counts[0])
      throw AgreedError(true, r,
                        fmt::format("the ranks of this job run different ptdp builds: rank 0 compares {} "
                                    "configuration fields, rank {} {}",
                                    counts[0], r, counts[r]));
  const int k = int(fields.size());
  if (k == 0) return;
  Tensor in = Tensor::empty({2 * k}, DType::I32), all = Tensor::empty({int64_t(2) * k * n}, DType::I32);
  for (int i = 0; i < k; ++i) {
    const uint64_t h = fnv1a64(fields[i].second);
    in.data<int32_t>()[2 * i] = int32_t(uint32_t(h));
    in.data<int32_t>()[2 * i + 1] = int32_t(uint32_t(h >> 32));
  }
  world.all_gather(in, all);
  const int32_t* a = all.data<int32_t>();
  auto differs = [&](int i, int r) {
    return a[2 * k * r + 2 * i] != a[2 * i] || a[2 * k * r + 2 * i + 1] != a[2 * i + 1];
  };
  int field = -1;
  std::vector<int> ranks;
  std::vector<std::string> also;
  for (int i = 0; i < k; ++i) {
    std::vector<int> here;
    for (int r = 1; r < n; ++r)
      if (differs(i, r)) here.push_back(r);
    if (here.empty()) continue;
    if (field < 0) {
      field = i;
      ranks = here;
    } else {
      also.push_back(fields[i].first);
    }
  }
  if (field < 0) return;
  // Every rank knows which field and ranks differ; the two values travel from their ranks.
  const std::string v0 = broadcast_string(world, fields[field].second, 0);
  const std::string vr = broadcast_string(world, fields[field].second, ranks.front());
  std::string also_text;
  for (const auto& f : also) also_text += (also_text.empty() ? "" : ", ") + f;
  throw AgreedError(
      true, ranks.front(),
      fmt::format("the ranks of this job disagree on {}: rank 0 has '{}', rank {} has '{}'{}{}; {}", fields[field].first,
                  v0, ranks.front(), vr,
                  ranks.size() > 1 ? fmt::format(" (ranks {} differ from rank 0)", rank_list(ranks)) : "",
                  also.empty() ? "" : fmt::format("; they differ on {} too", also_text), hint));
}

}  // namespace ptdp
