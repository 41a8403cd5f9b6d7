// vgpu: kernel launches. PTDP_LAUNCH(grid, block, shmem, stream, kernel)(args...) expands to
// vgpu::launch(...)(args...), which converts and copies the arguments as a CUDA launch does, checks the
// configuration and the pointer arguments, and queues the grid on the stream (src/kernel/launch.cpp).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace vgpu {

// Order in which the fibers of a block start and resume after each barrier, and blocks run:
// forward (thread 0 first), reverse, or shuffle (a permutation drawn from the seed, the kernel's
// name and the block). Other orders expose missing __syncthreads. Default from the environment:
// VGPU_THREAD_ORDER=forward|reverse|shuffle, VGPU_SEED=<integer>.
enum class ThreadOrder { Forward, Reverse, Shuffle };
void set_thread_order(ThreadOrder order, uint64_t seed = 1);
ThreadOrder thread_order();
uint64_t thread_order_seed();

namespace detail {

struct KernelSpec {
  const char* name = "";  // as written at the launch: "gelu_forward_kernel<T>"
  const char* file = nullptr;
  int line = 0;
  dim3 grid, block;
  size_t shmem = 0;
  size_t closure_bytes = 0;  // the size of the closure run_grid gets (its parameters, host memory)
  // The launch's pointer arguments (and pointer fields), which the accesses of the kernel must
  // stay within the allocations of (kernel/access_check.h); null when not known.
  const void* const* args = nullptr;
  size_t nargs = 0;
  // The parameters' values, hashed with each data pointer left out (its allocation stands in for
  // it: kernel/access_check.h, VGPU_ACCESS_CHECK=once); 0 when a parameter's bytes have padding.
  uint64_t params_id = 0;
};
using ThreadBody = void (*)(const void* closure);  // runs the kernel for the current fiber

struct PointerArg {
  const void* ptr;
  bool read_only;  // pointer to const
  int arg;         // 1-based argument number
  int field;       // 1-based field of an aggregate argument, 0 for the argument itself
};

// Checks the configuration (an invalid one sets the thread's last error and queues nothing) and
// the pointers, then queues the grid on the stream. Owns the closure until the grid has run.
void submit_launch(const KernelSpec& spec, cudaStream_t stream, const std::vector<PointerArg>& pointers,
                   std::shared_ptr<const void> closure, ThreadBody body);

// ---- Pointer fields of aggregate arguments (functors such as column_reduce's), so that their
// memory is checked and recorded for the race checker like a pointer argument's.
struct AnyField {
  template <class U> operator U() const;  // unevaluated only
};
template <class T, size_t... I>
constexpr bool braced_constructible(std::index_sequence<I...>) {
  // Each field gets its own braces, so no brace elision: counts direct fields exactly.
  return requires { T{{(static_cast<void>(I), AnyField{})}...}; };
}
template <class T, size_t... I>
constexpr bool braced_constructible_plus_empty(std::index_sequence<I...>) {
  return requires { T{{(static_cast<void>(I), AnyField{})}..., {}}; };
}
template <class T, size_t N = 0> constexpr size_t count_fields() {
  if constexpr (N > 12) {
    return 13;  // more fields than decomposed below
  } else if constexpr (!braced_constructible<T>(std::make_index_sequence<N + 1>{})) {
    return N;
  } else {
    return count_fields<T, N + 1>();
  }
}
// Customisation point: specialise to false_type for an aggregate argument whose fields must not be
// decomposed (one with a base class: structured bindings cannot name its fields).
template <class T> struct inspect_fields : std::true_type {};
// Number of fields of an aggregate, or 0 when it cannot be determined safely: a field that the
// probe cannot initialise (so that a further field still takes `{}`), or more than 12 fields.
template <class T> constexpr size_t field_count() {
  if constexpr (!inspect_fields<T>::value) {
    return 0;
  } else {
    constexpr size_t n = count_fields<T>();
    if constexpr (n > 12 || braced_constructible_plus_empty<T>(std::make_index_sequence<n>{}))
      return 0;
    else
      return n;
  }
}
template <class T> auto field_refs(const T& t) {
  constexpr size_t n = field_count<T>();
  // clang-format off
  if constexpr (n == 1) { const auto& [a] = t; return std::tie(a); }
  else if constexpr (n == 2) { const auto& [a, b] = t; return std::tie(a, b); }
  else if constexpr (n == 3) { const auto& [a, b, c] = t; return std::tie(a, b, c); }
  else if constexpr (n == 4) { const auto& [a, b, c, d] = t; return std::tie(a, b, c, d); }
  else if constexpr (n == 5) { const auto& [a, b, c, d, e] = t; return std::tie(a, b, c, d, e); }
  else if constexpr (n == 6) { const auto& [a, b, c, d, e, f] = t; return std::tie(a, b, c, d, e, f); }
  else if constexpr (n == 7) { const auto& [a, b, c, d, e, f, g] = t; return std::tie(a, b, c, d, e, f, g); }
  else if constexpr (n == 8) { const auto& [a, b, c, d, e, f, g, h] = t; return std::tie(a, b, c, d, e, f, g, h); }
  else if constexpr (n == 9) { const auto& [a, b, c, d, e, f, g, h, i] = t; return std::tie(a, b, c, d, e, f, g, h, i); }
  else if constexpr (n == 10) { const auto& [a, b, c, d, e, f, g, h, i, j] = t; return std::tie(a, b, c, d, e, f, g, h, i, j); }
  else if constexpr (n == 11) { const auto& [a, b, c, d, e, f, g, h, i, j, k] = t; return std::tie(a, b, c, d, e, f, g, h, i, j, k); }
  else if constexpr (n == 12) { const auto& [a, b, c, d, e, f, g, h, i, j, k, l] = t; return std::tie(a, b, c, d, e, f, g, h, i, j, k, l); }
  else { return std::tuple<>(); }
  // clang-format on
}

template <class T> constexpr bool is_data_pointer_v =
    std::is_pointer_v<T> && !std::is_function_v<std::remove_pointer_t<T>>;

template <class T> void collect_field(const T& v, int arg, int field, std::vector<PointerArg>& out) {
  if constexpr (is_data_pointer_v<T>)
    out.push_back(PointerArg{static_cast<const void*>(v), std::is_const_v<std::remove_pointer_t<T>>, arg, field});
}
// A pointer argument, or the pointer fields of an aggregate argument (one level).
template <class T> void collect_pointer(const T& v, int arg, std::vector<PointerArg>& out) {
  if constexpr (is_data_pointer_v<T>) {
    collect_field(v, arg, 0, out);
  } else if constexpr (std::is_class_v<T> && std::is_aggregate_v<T>) {
    std::apply(
        [&](const auto&... f) {
          int j = 0;
          (collect_field(f, arg, ++j, out), ...);
        },
        field_refs(v));
  }
}

// FNV-1a over the parameters' values (KernelSpec::params_id): a data pointer counts as a marker,
// and so does a floating-point value (a learning rate, a step's bias correction, a loss scale:
// they change every step and no ptdp kernel's accesses depend on them), an aggregate's fields one
// by one, anything else by its bytes when it has no padding; otherwise the launch has no identity
// (known = false).
struct ParamHash {
  uint64_t h = 0xcbf29ce484222325ull;
  bool known = true;
  void mix(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  }
  template <class T> void value(const T& v) {
    if constexpr (is_data_pointer_v<T>) {
      mix("p", 1);
    } else if constexpr (std::has_unique_object_representations_v<T>) {
      mix(&v, sizeof v);
    } else if constexpr (std::is_floating_point_v<T>) {
      mix("f", 1);
    } else {
      known = false;
    }
  }
  template <class T> void param(const T& v) {
    if constexpr (std::is_class_v<T> && std::is_aggregate_v<T> && field_count<T>() > 0)
      std::apply([&](const auto&... f) { (value(f), ...); }, field_refs(v));
    else if constexpr (std::is_class_v<T> && std::is_empty_v<T>)
      mix("e", 1);
    else
      value(v);
  }
};

template <class Kernel, class Args> struct Closure {
  Kernel kernel;
  Args args;
};
template <class C> void run_closure(const void* p) {
  const C& c = *static_cast<const C*>(p);
  std::apply(c.kernel, c.args);  // each CUDA thread gets its own copy of the parameters
}

// A call with the kernel's parameter types: the arguments convert exactly as in kernel(args...).
template <class... P> std::tuple<std::decay_t<P>...> pack_args(std::decay_t<P>... p) {
  return std::tuple<std::decay_t<P>...>(std::move(p)...);
}

}  // namespace detail

template <class... P> class Launcher {
 public:
  Launcher(const detail::KernelSpec& spec, cudaStream_t stream, void (*kernel)(P...))
      : spec_(spec), stream_(stream), kernel_(kernel) {}

  template <class... A> void operator()(A&&... args) const {
    static_assert(sizeof...(A) == sizeof...(P), "kernel launched with the wrong number of arguments");
    using Args = std::tuple<std::decay_t<P>...>;
    using C = detail::Closure<void (*)(P...), Args>;
    auto closure = std::make_shared<C>(C{kernel_, detail::pack_args<P...>(std::forward<A>(args)...)});
    detail::KernelSpec spec = spec_;
    spec.closure_bytes = sizeof(C);
    std::vector<detail::PointerArg> pointers;
    std::apply(
        [&](const auto&... a) {
          int i = 0;
          (detail::collect_pointer(a, ++i, pointers), ...);
        },
        closure->args);
    detail::ParamHash id;
    std::apply([&](const auto&... a) { (id.param(a), ...); }, closure->args);
    spec.params_id = !id.known ? 0 : id.h != 0 ? id.h : 1;
    detail::submit_launch(spec, stream_, pointers, std::move(closure), &detail::run_closure<C>);
  }

 private:
  detail::KernelSpec spec_;
  cudaStream_t stream_;
  void (*kernel_)(P...);
};

template <class... P>
Launcher<P...> launch(const char* name, const char* file, int line, dim3 grid, dim3 block, size_t shmem,
                      cudaStream_t stream, void (*kernel)(P...)) {
  detail::KernelSpec spec;
  spec.name = name;
  spec.file = file;
  spec.line = line;
  spec.grid = grid;
  spec.block = block;
  spec.shmem = shmem;
  return Launcher<P...>(spec, stream, kernel);
}

}  // namespace vgpu
