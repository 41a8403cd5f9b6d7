// The executor's thread order: the setting (environment, set_thread_order) and its permutations.
#include "kernel/thread_order.h"

#include <vgpu/runtime.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <string>

namespace vgpu {
namespace {

std::atomic<int> g_order{-1};  // -1: not yet read from the environment
std::atomic<uint64_t> g_seed{1};
std::once_flag g_env_once;

void read_environment() {
  std::call_once(g_env_once, [] {
    if (const char* s = std::getenv("VGPU_SEED"); s && *s) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(s, &end, 0);
      if (*end != '\0')
        report_violation("configuration", std::string("VGPU_SEED='") + s + "' is not an integer; using 1");
      else
        g_seed.store(v);
    }
    ThreadOrder order = ThreadOrder::Forward;
    if (const char* s = std::getenv("VGPU_THREAD_ORDER"); s && *s) {
      if (std::strcmp(s, "reverse") == 0)
        order = ThreadOrder::Reverse;
      else if (std::strcmp(s, "shuffle") == 0)
        order = ThreadOrder::Shuffle;
      else if (std::strcmp(s, "forward") != 0)
        report_violation("configuration", std::string("VGPU_THREAD_ORDER='") + s +
                                              "' must be forward, reverse or shuffle; using forward");
    }
    int expected = -1;
    g_order.compare_exchange_strong(expected, static_cast<int>(order));  // set_thread_order wins
  });
}

}  // namespace

void set_thread_order(ThreadOrder order, uint64_t seed) {
  read_environment();
  g_seed.store(seed);
  g_order.store(static_cast<int>(order));
}

ThreadOrder thread_order() {
  read_environment();
  return static_cast<ThreadOrder>(g_order.load());
}

uint64_t thread_order_seed() {
  read_environment();
  return g_seed.load();
}

namespace kernel {

OrderSetting current_order() { return OrderSetting{thread_order(), thread_order_seed()}; }

uint64_t hash_name(const char* s) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (; s && *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 0x100000001b3ull;
  return h;
}

BlockOrder::BlockOrder(OrderSetting s, uint64_t name_hash, uint64_t total) : order_(s.order), total_(total) {
  if (order_ != ThreadOrder::Shuffle || total_ < 2) return;
  uint64_t r = mix64(s.seed ^ name_hash);
  b_ = r % total_;
  a_ = mix64(r) % total_;
  if (a_ == 0) a_ = 1;
  while (std::gcd(a_, total_) != 1) a_ = a_ + 1 == total_ ? 1 : a_ + 1;
}

uint64_t BlockOrder::at(uint64_t k) const {
  if (order_ == ThreadOrder::Reverse) return total_ - 1 - k;
  if (order_ == ThreadOrder::Forward || total_ < 2) return k;
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a_) * k + b_) % total_);
}

void FiberOrder::begin_block(OrderSetting s, uint64_t name_hash, uint64_t block) {
  order_ = s.order;
  if (order_ == ThreadOrder::Shuffle) state_ = mix64(s.seed ^ mix64(name_hash ^ mix64(block)));
}

void FiberOrder::shuffle(uint32_t n) {
  perm_.resize(n);
  std::iota(perm_.begin(), perm_.end(), 0u);
  for (uint32_t i = n; i > 1; --i) std::swap(perm_[i - 1], perm_[next() % i]);
}

}  // namespace kernel
}  // namespace vgpu
