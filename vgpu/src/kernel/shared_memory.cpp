// Shared memory poison (shared_memory.h): the tagged __shared__ variables are found in the
// executable's ELF symbol table (.symtab, else .dynsym), as offsets into its TLS block; each
// thread's copy of that block is found with dl_iterate_phdr (dlpi_tls_data). A probe variable
// of this file, tagged the same way, checks the arithmetic: if its computed address is not its
// real one, poisoning stays off.
#include "kernel/shared_memory.h"

#include <vgpu/runtime.h>

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace vgpu::kernel {
namespace {

constexpr unsigned char kSharedPoison = 0xFF;

// Tagged like a __shared__ variable: its symbol is found with the others.
char* probe() {
  __attribute__((abi_tag("vgpu_shared"))) static thread_local char p[8];
  return p;
}

struct Found {
  std::vector<std::pair<size_t, size_t>> ranges;  // (offset in the TLS block, bytes), merged
  std::vector<std::pair<size_t, size_t>> variables;  // each variable (offset, bytes), sorted
  std::vector<std::string> names;                    // their symbols, demangled
  size_t tls_bytes = 0;                              // the executable's TLS block
  long count = -1;
  std::vector<std::string> unguarded;  // variables whose end no red zone follows (device.h)
  size_t bytes = 0;
};

struct Symbol {
  size_t offset, bytes;
  std::string name;
};
// The __shared__ variables into *out, their red zones' offsets into *redzones.
void scan_symbols(const unsigned char* img, size_t size, std::vector<Symbol>* out, std::vector<size_t>* redzones) {
  if (size < sizeof(Elf64_Ehdr)) return;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(img);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) return;
  if (eh->e_shoff == 0 || eh->e_shoff + size_t(eh->e_shnum) * sizeof(Elf64_Shdr) > size) return;
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(img + eh->e_shoff);
  for (unsigned want : {unsigned(SHT_SYMTAB), unsigned(SHT_DYNSYM)}) {
    for (int i = 0; i < eh->e_shnum; ++i) {
      if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum) continue;
      const Elf64_Shdr& strs = sh[sh[i].sh_link];
      if (sh[i].sh_offset + sh[i].sh_size > size || strs.sh_offset + strs.sh_size > size) continue;
      const auto* syms = reinterpret_cast<const Elf64_Sym*>(img + sh[i].sh_offset);
      const size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
      const char* names = reinterpret_cast<const char*>(img + strs.sh_offset);
      for (size_t k = 0; k < n; ++k) {
        if (ELF64_ST_TYPE(syms[k].st_info) != STT_TLS || syms[k].st_size == 0 || syms[k].st_name >= strs.sh_size)
          continue;
        if (std::strstr(names + syms[k].st_name, "B11vgpu_shared"))
          out->push_back(Symbol{size_t(syms[k].st_value), size_t(syms[k].st_size), names + syms[k].st_name});
        else if (std::strstr(names + syms[k].st_name, "B12vgpu_redzone"))
          redzones->push_back(size_t(syms[k].st_value));
      }
    }
    if (!out->empty()) return;  // .symtab had them: .dynsym adds nothing
  }
}

char* this_thread_tls_block(size_t* bytes = nullptr) {
  struct Out {
    char* base = nullptr;
    size_t bytes = 0;
  } out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* p) {
        auto* o = static_cast<Out*>(p);
        o->base = static_cast<char*>(info->dlpi_tls_data);
        for (int i = 0; i < info->dlpi_phnum; ++i)
          if (info->dlpi_phdr[i].p_type == PT_TLS) o->bytes = info->dlpi_phdr[i].p_memsz;
        return 1;  // the first entry is the executable
      },
      &out);
  if (bytes) *bytes = out.bytes;
  return out.base;
}

std::string demangled(const std::string& symbol) {
  int status = 0;
  char* d = abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : symbol;
  std::free(d);
  return s;
}

const Found& found() {
  static const Found f = [] {
    Found r;
    const int fd = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return r;
    struct stat st;
    if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
      ::close(fd);
      return r;
    }
    const size_t size = size_t(st.st_size);
    void* img = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (img == MAP_FAILED) return r;
    std::vector<Symbol> syms;
    std::vector<size_t> redzones;
    scan_symbols(static_cast<const unsigned char*>(img), size, &syms, &redzones);
    ::munmap(img, size);
    // The probe must be found where this thread's copy of it really is.
    char* base = this_thread_tls_block(&r.tls_bytes);
    bool probe_ok = false;
    for (const Symbol& s : syms)
      if (base && base + s.offset == probe() && s.bytes == 8) probe_ok = true;
    if (!probe_ok) return r;
    r.count = long(syms.size());
    std::sort(syms.begin(), syms.end(), [](const Symbol& a, const Symbol& b) { return a.offset < b.offset; });
    std::vector<std::pair<size_t, size_t>> v;
    for (const Symbol& s : syms) {
      v.emplace_back(s.offset, s.bytes);
      r.names.push_back(demangled(s.name));
    }
    r.variables = v;
    // Guarded: the first thing at or after a variable's end is a red zone, not another variable.
    std::sort(redzones.begin(), redzones.end());
    for (size_t i = 0; i < v.size(); ++i) {
      const size_t end = v[i].first + v[i].second;
      auto z = std::lower_bound(redzones.begin(), redzones.end(), end);
      if (z == redzones.end() || (i + 1 < v.size() && *z >= v[i + 1].first)) r.unguarded.push_back(r.names[i]);
    }
    for (const auto& [off, n] : v) {
      r.bytes += n;
      if (!r.ranges.empty() && off <= r.ranges.back().first + r.ranges.back().second)
        r.ranges.back().second = std::max(r.ranges.back().second, off + n - r.ranges.back().first);
      else
        r.ranges.emplace_back(off, n);
    }
    return r;
  }();
  return f;
}

bool poison_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("VGPU_SHARED_POISON");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

}  // namespace

constinit thread_local SharedWrites t_shared_writes{};

namespace {
thread_local uint64_t t_block_writes = 0;  // t_shared_writes.count when the block began
}  // namespace

void poison_shared_memory() {
  if (!poison_enabled()) return;
  const Found& f = found();
  if (f.ranges.empty()) return;
  thread_local char* base = this_thread_tls_block();
  if (!base) return;
  SharedWrites& w = t_shared_writes;
  const size_t first = f.ranges.front().first;
  const size_t end = f.ranges.back().first + f.ranges.back().second;
  for (const auto& [off, n] : f.ranges) {  // [w.lo, w.hi) of each, as offsets from the first variable
    const size_t a = std::max(off - first, w.lo), b = std::min(off - first + n, w.hi);
    if (a < b) std::memset(base + first + a, kSharedPoison, b - a);
  }
  w.lo_addr = reinterpret_cast<uintptr_t>(base + first);
  w.span = end - first;
  w.lo = SIZE_MAX;
  w.hi = 0;
  t_block_writes = w.count;
}

void shared_block_done() {
  SharedWrites& w = t_shared_writes;
  if (w.count == t_block_writes) w.lo = 0, w.hi = SIZE_MAX;  // an uninstrumented kernel: fill all
}

long shared_variables_found() { return found().count; }

ThreadSharedMemory this_thread_shared_memory() {
  ThreadSharedMemory m;
  const Found& f = found();
  thread_local char* base = this_thread_tls_block();
  if (!base || f.count < 0) return m;
  m.tls_lo = base;
  m.tls_hi = base + f.tls_bytes;
  for (size_t i = 0; i < f.variables.size(); ++i)
    m.variables.push_back(SharedVariable{base + f.variables[i].first, f.variables[i].second, &f.names[i]});
  return m;
}
size_t shared_bytes_found() { return found().bytes; }

}  // namespace vgpu::kernel

namespace vgpu {
std::vector<std::string> unguarded_shared_variables() { return kernel::found().unguarded; }
}  // namespace vgpu
