// Registry of live cuBLAS / cuBLASLt objects with a quarantine of destroyed ones (see handles.h).
#include "cublas/handles.h"

#include <vgpu/runtime.h>

#include <deque>
#include <memory>
#include <mutex>
#include <sstream>
#include <unordered_map>

namespace vgpu::blas {
namespace {

// Destroyed objects kept (unfreed) before their memory may be reused.
constexpr size_t kQuarantine = 4096;

struct Entry {
  Kind kind;
  bool alive = true;
  Object* owner = nullptr;
  std::shared_ptr<Site> destroyed_at;  // set when retired
};

struct Registry {
  std::mutex mu;
  std::unordered_map<const void*, Entry> entries;
  std::deque<const void*> quarantine;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: objects may be destroyed during exit
  return *r;
}

const char* create_api(Kind k) {
  switch (k) {
    case Kind::BlasHandle:
      return "cublasCreate";
    case Kind::LtHandle:
      return "cublasLtCreate";
    case Kind::MatmulDesc:
      return "cublasLtMatmulDescCreate";
    case Kind::MatrixLayout:
      return "cublasLtMatrixLayoutCreate";
    case Kind::Preference:
      return "cublasLtMatmulPreferenceCreate";
  }
  return "?";
}

// The report for a bad object, or "" when `e` (null: unknown) is a live object of kind `want`.
// Sets `kind` to the violation kind.
std::string diagnose(const char* api, const char* param, const void* p, Kind want, const Entry* e, std::string& kind) {
  std::ostringstream m;
  if (e && e->alive && e->kind == want) return "";
  if (e && e->kind == want) {
    kind = "use after destroy";
    m << api << ": " << param << " (" << p << ") is a " << kind_name(want)
      << " that was already destroyed. A cuBLAS object must not be used after its Destroy call (with the real "
         "library this reads freed host memory).";
    if (e->destroyed_at) m << "\n  destroyed by: " << e->destroyed_at->describe();
  } else if (e) {
    kind = "invalid handle";
    m << api << ": " << param << " (" << p << ") is a " << kind_name(e->kind) << (e->alive ? "" : " (destroyed)")
      << ", not the " << kind_name(want) << " this parameter takes.";
  } else {
    kind = "invalid handle";
    m << api << ": " << param << " (" << p << ") is not a " << kind_name(want) << " made by " << create_api(want)
      << " (never created, corrupted, or destroyed long ago).";
  }
  return m.str();
}

}  // namespace

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::BlasHandle:
      return "cublasHandle_t";
    case Kind::LtHandle:
      return "cublasLtHandle_t";
    case Kind::MatmulDesc:
      return "cublasLtMatmulDesc_t";
    case Kind::MatrixLayout:
      return "cublasLtMatrixLayout_t";
    case Kind::Preference:
      return "cublasLtMatmulPreference_t";
  }
  return "?";
}

void register_object(const void* p, Kind kind, Object* owner) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  // A quarantined entry at this address cannot exist: quarantined memory is not freed.
  r.entries[p] = Entry{kind, true, owner, nullptr};
}

cublasStatus_t retire_object(const void* p, Kind kind, const char* api, cublasStatus_t on_null, cublasStatus_t on_bad) {
  if (!p) return on_null;
  Registry& r = registry();
  Object* evicted = nullptr;
  std::string msg, vkind;
  auto site = std::make_shared<Site>(capture_site(api));
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.entries.find(p);
    msg = diagnose(api, "the object to destroy", p, kind, it == r.entries.end() ? nullptr : &it->second, vkind);
    if (msg.empty()) {
      it->second.alive = false;
      it->second.destroyed_at = std::move(site);
      r.quarantine.push_back(p);
      if (r.quarantine.size() > kQuarantine) {
        auto old = r.entries.find(r.quarantine.front());
        r.quarantine.pop_front();
        evicted = old->second.owner;
        r.entries.erase(old);
      }
    }
  }
  delete evicted;
  if (msg.empty()) return CUBLAS_STATUS_SUCCESS;
  report_violation(vkind, msg);
  return on_bad;
}

cublasStatus_t check_objects(const char* api, std::initializer_list<Use> uses) {
  for (const Use& u : uses)
    if (!u.p) return u.status;
  Registry& r = registry();
  std::string msg, vkind;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (const Use& u : uses) {
      auto it = r.entries.find(u.p);
      msg = diagnose(api, u.param, u.p, u.kind, it == r.entries.end() ? nullptr : &it->second, vkind);
      if (!msg.empty()) {
        status = u.status;
        break;
      }
    }
  }
  if (!msg.empty()) report_violation(vkind, msg);
  return status;
}

}  // namespace vgpu::blas
