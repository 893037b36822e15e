// The ELF checks made before dlopen (elf_check.hpp). Every field is read with memcpy (the bytes
// need not be aligned) and every offset + size is tested without overflow before it is read.
#include "elf_check.hpp"

#include <elf.h>

#include <cstring>
#include <vector>

#include "hidet/runtime/error.hpp"

namespace hidet {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kMachine = EM_X86_64;
constexpr const char* kMachineName = "x86-64";
constexpr uint32_t kRelative = R_X86_64_RELATIVE;
#elif defined(__aarch64__)
constexpr uint16_t kMachine = EM_AARCH64;
constexpr const char* kMachineName = "aarch64";
constexpr uint32_t kRelative = R_AARCH64_RELATIVE;
#else
#error "hidet's ELF check knows x86-64 and aarch64 only"
#endif

// [offset, offset + n) lies inside [0, size), without overflow.
bool inside(uint64_t offset, uint64_t n, uint64_t size) { return offset <= size && n <= size - offset; }

template <typename T>
T read_at(const uint8_t* data, uint64_t offset) {
  T v;
  std::memcpy(&v, data + offset, sizeof(T));
  return v;
}

struct Failure {
  std::string message;
};

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Failure{str_cat(args...)};
}

class Checker {
 public:
  Checker(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  void run() {
    header();
    program_headers();
    section_headers();
    dynamic_section();
  }

 private:
  void header() {
    if (size_ < SELFMAG || std::memcmp(data_, ELFMAG, SELFMAG) != 0) fail("not an ELF file (bad magic)");
    if (size_ < sizeof(Elf64_Ehdr)) fail("truncated: the file has ", size_, " bytes, less than an ELF header");
    eh_ = read_at<Elf64_Ehdr>(data_, 0);
    if (eh_.e_ident[EI_CLASS] != ELFCLASS64) fail("not a 64-bit ELF file (class ", int(eh_.e_ident[EI_CLASS]), ")");
    if (eh_.e_ident[EI_DATA] != ELFDATA2LSB) fail("not a little-endian ELF file");
    if (eh_.e_ident[EI_VERSION] != EV_CURRENT || eh_.e_version != EV_CURRENT) fail("unknown ELF version");
    if (eh_.e_type != ET_DYN) fail("not a shared library (ELF type ", eh_.e_type, ", expected ET_DYN)");
    if (eh_.e_machine != kMachine) fail("built for another machine (ELF machine ", eh_.e_machine, ", expected ", kMachineName, ")");
    if (eh_.e_ehsize != sizeof(Elf64_Ehdr)) fail("corrupt ELF header (e_ehsize ", eh_.e_ehsize, ")");
  }

  void program_headers() {
    if (eh_.e_phentsize != sizeof(Elf64_Phdr)) fail("corrupt ELF header (e_phentsize ", eh_.e_phentsize, ")");
    if (eh_.e_phnum == 0 || eh_.e_phnum == PN_XNUM) fail("corrupt ELF header (", eh_.e_phnum, " program headers)");
    uint64_t table = uint64_t(eh_.e_phnum) * sizeof(Elf64_Phdr);
    if (!inside(eh_.e_phoff, table, size_)) {
      fail("truncated: the program headers (bytes ", eh_.e_phoff, "..+", table, ") end past the end of the file (",
           size_, " bytes)");
    }
    int dynamic = 0;
    for (uint16_t i = 0; i < eh_.e_phnum; ++i) {
      Elf64_Phdr ph = read_at<Elf64_Phdr>(data_, eh_.e_phoff + uint64_t(i) * sizeof(Elf64_Phdr));
      const char* kind = ph.p_type == PT_LOAD ? "PT_LOAD" : ph.p_type == PT_DYNAMIC ? "PT_DYNAMIC" : "PT_TLS";
      if (ph.p_type != PT_LOAD && ph.p_type != PT_DYNAMIC && ph.p_type != PT_TLS) continue;
      if (!inside(ph.p_offset, ph.p_filesz, size_)) {
        fail("truncated: ", kind, " segment ", i, " (bytes ", ph.p_offset, "..+", ph.p_filesz,
             ") ends past the end of the file (", size_, " bytes)");
      }
      if (ph.p_filesz > ph.p_memsz) fail("corrupt ", kind, " segment ", i, ": file size above memory size");
      if (ph.p_vaddr > UINT64_MAX - ph.p_memsz) fail("corrupt ", kind, " segment ", i, ": its addresses overflow");
      if (ph.p_align > 1 && (ph.p_align & (ph.p_align - 1)) != 0) {
        fail("corrupt ", kind, " segment ", i, ": alignment ", ph.p_align, " is not a power of two");
      }
      if (ph.p_type == PT_DYNAMIC) {
        dynamic_ = ph;
        ++dynamic;
      }
      if (ph.p_type == PT_TLS) tls_.push_back(ph);
      if (ph.p_type != PT_LOAD) continue;
      if (ph.p_align > 1 && ph.p_vaddr % ph.p_align != ph.p_offset % ph.p_align) {
        fail("corrupt PT_LOAD segment ", i, ": address and file offset disagree modulo its alignment");
      }
      if (!loads_.empty() && ph.p_vaddr < loads_.back().p_vaddr + loads_.back().p_memsz) {
        fail("corrupt PT_LOAD segment ", i, ": not above the previous segment");
      }
      loads_.push_back(ph);
    }
    if (loads_.empty()) fail("corrupt: no PT_LOAD segment");
    if (dynamic != 1) fail("corrupt: ", dynamic, " PT_DYNAMIC segments (a shared library has one)");
    // The loader makes PT_GNU_RELRO read-only after relocating: beyond its writable segment it would take
    // writes away from .data/.bss (or reads and execution from other segments).
    for (uint16_t i = 0; i < eh_.e_phnum; ++i) {
      Elf64_Phdr ph = read_at<Elf64_Phdr>(data_, eh_.e_phoff + uint64_t(i) * sizeof(Elf64_Phdr));
      if (ph.p_type == PT_GNU_RELRO && !mapped(ph.p_vaddr, ph.p_memsz, true)) {
        fail("corrupt PT_GNU_RELRO segment ", i, ": not inside a writable PT_LOAD segment");
      }
      // The loader reads notes (x86 feature properties) from memory.
      if ((ph.p_type == PT_NOTE || ph.p_type == PT_GNU_PROPERTY) && !mapped(ph.p_vaddr, ph.p_memsz, false)) {
        fail("corrupt note segment ", i, ": not inside a PT_LOAD segment");
      }
    }
  }

  void section_headers() {
    if (eh_.e_shoff == 0) return;  // no section headers (allowed: the loader does not use them)
    if (eh_.e_shentsize != sizeof(Elf64_Shdr)) fail("corrupt ELF header (e_shentsize ", eh_.e_shentsize, ")");
    if (!inside(eh_.e_shoff, sizeof(Elf64_Shdr), size_)) {
      fail("truncated: the section headers (from byte ", eh_.e_shoff, ") start past the end of the file (", size_,
           " bytes)");
    }
    // Past SHN_LORESERVE sections, the count is in section 0's sh_size.
    uint64_t count = eh_.e_shnum != 0 ? eh_.e_shnum : read_at<Elf64_Shdr>(data_, eh_.e_shoff).sh_size;
    if (count > size_ / sizeof(Elf64_Shdr) || !inside(eh_.e_shoff, count * sizeof(Elf64_Shdr), size_)) {
      fail("truncated: the section headers (", count, " from byte ", eh_.e_shoff,
           ") end past the end of the file (", size_, " bytes)");
    }
    for (uint64_t i = 1; i < count; ++i) {
      Elf64_Shdr sh = read_at<Elf64_Shdr>(data_, eh_.e_shoff + i * sizeof(Elf64_Shdr));
      if (sh.sh_type != SHT_NOBITS && sh.sh_type != SHT_NULL && !inside(sh.sh_offset, sh.sh_size, size_)) {
        fail("truncated: section ", i, " (bytes ", sh.sh_offset, "..+", sh.sh_size, ") ends past the end of the file (",
             size_, " bytes)");
      }
      // Every allocated section inside a segment that maps it as it needs: a PT_LOAD whose type was damaged
      // is not mapped, and code reading its data or calling its code crashed (the program headers are what
      // the loader uses; the section headers are a second description to check them against).
      if (!(sh.sh_flags & SHF_ALLOC) || sh.sh_size == 0) continue;
      if (sh.sh_flags & SHF_TLS) {
        bool in_tls = false;
        for (const Elf64_Phdr& t : tls_) {
          in_tls = in_tls || (sh.sh_addr >= t.p_vaddr && inside(sh.sh_addr - t.p_vaddr, sh.sh_size, t.p_memsz));
        }
        if (!in_tls) fail("corrupt: thread-local section ", i, " lies outside the PT_TLS segment");
        continue;
      }
      const Elf64_Phdr* seg = nullptr;
      for (const Elf64_Phdr& ph : loads_) {
        if (sh.sh_addr >= ph.p_vaddr && inside(sh.sh_addr - ph.p_vaddr, sh.sh_size, ph.p_memsz)) seg = &ph;
      }
      if (seg == nullptr) fail("corrupt: section ", i, " (at ", sh.sh_addr, ") lies outside the PT_LOAD segments");
      if (!(seg->p_flags & PF_R) || ((sh.sh_flags & SHF_EXECINSTR) && !(seg->p_flags & PF_X)) ||
          ((sh.sh_flags & SHF_WRITE) && !(seg->p_flags & PF_W))) {
        fail("corrupt: section ", i, " (at ", sh.sh_addr, ") lies in a segment without the permissions it needs");
      }
    }
  }

  // The file offset of the n bytes at address `vaddr`, when a PT_LOAD segment's file bytes hold them all.
  bool file_offset(uint64_t vaddr, uint64_t n, uint64_t* offset) const {
    for (const Elf64_Phdr& ph : loads_) {
      if (vaddr >= ph.p_vaddr && inside(vaddr - ph.p_vaddr, n, ph.p_filesz)) {
        *offset = ph.p_offset + (vaddr - ph.p_vaddr);
        return true;
      }
    }
    return false;
  }

  // Whether the n bytes at `vaddr` lie in one PT_LOAD segment's memory (writable ones only if asked).
  bool mapped(uint64_t vaddr, uint64_t n, bool writable) const {
    for (const Elf64_Phdr& ph : loads_) {
      if (vaddr >= ph.p_vaddr && inside(vaddr - ph.p_vaddr, n, ph.p_memsz)) return !writable || (ph.p_flags & PF_W);
    }
    return false;
  }

  // The GNU symbol hash table at `vaddr`, which the loader sets up at load and walks on every lookup (found by
  // the long fuzz run: ld.so asserts that the Bloom filter's word count is a power of two, and reads buckets and
  // chains where the header says). Its header, Bloom filter and buckets inside the file; every chain, from its
  // bucket to the entry with the end bit, inside the file, and its symbols inside the symbol table's segment.
  void gnu_hash(uint64_t vaddr, uint64_t symtab) {
    uint64_t off = 0;
    if (!file_offset(vaddr, 16, &off)) fail("corrupt dynamic section: the GNU hash table lies outside the file");
    uint32_t nbuckets = read_at<uint32_t>(data_, off), symoffset = read_at<uint32_t>(data_, off + 4);
    uint32_t bloom_words = read_at<uint32_t>(data_, off + 8);
    if (bloom_words == 0 || (bloom_words & (bloom_words - 1)) != 0) {
      fail("corrupt GNU hash table: ", bloom_words, " Bloom filter words (a power of two expected)");
    }
    uint64_t buckets_at = vaddr + 16 + uint64_t(bloom_words) * 8, chains_at = buckets_at + uint64_t(nbuckets) * 4;
    uint64_t buckets_off = 0;
    if (!file_offset(vaddr, chains_at - vaddr, &off) ||
        !file_offset(buckets_at, uint64_t(nbuckets) * 4, &buckets_off)) {
      fail("corrupt GNU hash table: its ", bloom_words, " Bloom words and ", nbuckets, " buckets lie outside the file");
    }
    for (uint32_t b = 0; b < nbuckets; ++b) {
      uint32_t sym = read_at<uint32_t>(data_, buckets_off + uint64_t(b) * 4);
      if (sym == 0) continue;
      if (sym < symoffset) fail("corrupt GNU hash table: bucket ", b, " names symbol ", sym, " below ", symoffset);
      for (uint64_t steps = 0;; ++sym, ++steps) {
        uint64_t at = 0;
        if (steps > size_ / 4 || !file_offset(chains_at + uint64_t(sym - symoffset) * 4, 4, &at) ||
            !mapped(symtab + uint64_t(sym) * sizeof(Elf64_Sym), sizeof(Elf64_Sym), false)) {
          fail("corrupt GNU hash table: the chain of bucket ", b, " runs outside the file or the symbol table");
        }
        if (read_at<uint32_t>(data_, at) & 1) break;  // the chain's last entry
      }
    }
  }

  void dynamic_section() {
    uint64_t at = 0;
    if (!file_offset(dynamic_.p_vaddr, dynamic_.p_filesz, &at)) {
      fail("corrupt PT_DYNAMIC segment: not inside the file bytes of a PT_LOAD segment");
    }
    uint64_t n = dynamic_.p_filesz / sizeof(Elf64_Dyn);
    std::vector<Elf64_Dyn> entries;
    bool ended = false;
    for (uint64_t i = 0; i < n && !ended; ++i) {
      Elf64_Dyn d = read_at<Elf64_Dyn>(data_, at + i * sizeof(Elf64_Dyn));
      ended = d.d_tag == DT_NULL;
      entries.push_back(d);
    }
    if (!ended) fail("corrupt dynamic section: no DT_NULL entry ends it");
    auto find = [&](int64_t tag, uint64_t* value) {
      for (const Elf64_Dyn& d : entries) {
        if (d.d_tag == tag) {
          *value = d.d_un.d_val;
          return true;
        }
      }
      return false;
    };
    uint64_t v = 0;
    // The loader asserts on these (or dereferences a missing one).
    if (find(DT_SYMENT, &v) && v != sizeof(Elf64_Sym)) fail("corrupt dynamic section: DT_SYMENT ", v);
    if (find(DT_PLTREL, &v) && v != DT_RELA) fail("corrupt dynamic section: DT_PLTREL ", v, " (expected DT_RELA)");
    if (find(DT_REL, &v)) fail("corrupt dynamic section: DT_REL relocations on a DT_RELA machine");
    bool has_rela = find(DT_RELA, &v);
    if (has_rela && (!find(DT_RELAENT, &v) || v != sizeof(Elf64_Rela))) {
      fail("corrupt dynamic section: DT_RELA without a DT_RELAENT of ", sizeof(Elf64_Rela));
    }
    // The string table and the names in it.
    uint64_t strtab = 0, strsz = 0, stroff = 0;
    if (!find(DT_STRTAB, &strtab) || !find(DT_STRSZ, &strsz)) fail("corrupt dynamic section: no string table");
    if (!file_offset(strtab, strsz, &stroff)) fail("corrupt dynamic section: the string table lies outside the file");
    for (const Elf64_Dyn& d : entries) {
      if (d.d_tag != DT_NEEDED && d.d_tag != DT_SONAME && d.d_tag != DT_RPATH && d.d_tag != DT_RUNPATH) continue;
      uint64_t name = d.d_un.d_val;
      if (name >= strsz || std::memchr(data_ + stroff + name, '\0', strsz - name) == nullptr) {
        fail("corrupt dynamic section: a library name (tag ", d.d_tag, ") outside the string table");
      }
    }
    uint64_t symtab = 0;
    if (!find(DT_SYMTAB, &symtab) || !mapped(symtab, sizeof(Elf64_Sym), false)) {
      fail("corrupt dynamic section: no symbol table inside a segment");
    }
    if (find(DT_GNU_HASH, &v)) gnu_hash(v, symtab);
    // Relocations: the tables inside the file, every target inside a writable segment (the loader
    // writes there; a target elsewhere would be a write into read-only or unmapped memory).
    uint64_t flags = 0;
    bool textrel = find(DT_TEXTREL, &v) || (find(DT_FLAGS, &flags) && (flags & DF_TEXTREL));
    relocations(find, DT_RELA, DT_RELASZ, "DT_RELA", textrel);
    relocations(find, DT_JMPREL, DT_PLTRELSZ, "DT_JMPREL", textrel);
    for (int64_t tag : {DT_INIT_ARRAY, DT_FINI_ARRAY}) {
      int64_t size_tag = tag == DT_INIT_ARRAY ? DT_INIT_ARRAYSZ : DT_FINI_ARRAYSZ;
      uint64_t addr = 0, nbytes = 0;
      if (find(tag, &addr) && (!find(size_tag, &nbytes) || !mapped(addr, nbytes, false))) {
        fail("corrupt dynamic section: the ", tag == DT_INIT_ARRAY ? "init" : "fini", " array lies outside the segments");
      }
      if (find(tag, &addr)) arrays_.push_back({addr, nbytes});
    }
    // Code the loader calls (DT_INIT, DT_FINI, the init/fini arrays' targets) and the functions the runtime
    // calls (defined function symbols) must lie in an executable PT_LOAD segment: a segment whose type was
    // damaged is not mapped, and a call there is a SIGSEGV inside dlopen.
    for (int64_t tag : {DT_INIT, DT_FINI}) {
      if (find(tag, &v) && !executable(v)) {
        fail("corrupt dynamic section: ", tag == DT_INIT ? "DT_INIT" : "DT_FINI", " (", v,
             ") is outside the executable segments");
      }
    }
    relative_targets(find, DT_RELA, DT_RELASZ);
    function_symbols();
  }

  bool executable(uint64_t vaddr) const {
    for (const Elf64_Phdr& ph : loads_) {
      if (vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr < ph.p_filesz) return (ph.p_flags & PF_X) != 0;
    }
    return false;
  }

  // R_*_RELATIVE relocations that fill the init/fini arrays: their addends are the functions called.
  template <typename Find>
  void relative_targets(Find& find, int64_t tag, int64_t size_tag) {
    uint64_t addr = 0, nbytes = 0, off = 0;
    if (arrays_.empty() || !find(tag, &addr) || !find(size_tag, &nbytes) || !file_offset(addr, nbytes, &off)) return;
    for (uint64_t i = 0; i < nbytes / sizeof(Elf64_Rela); ++i) {
      Elf64_Rela r = read_at<Elf64_Rela>(data_, off + i * sizeof(Elf64_Rela));
      if (ELF64_R_TYPE(r.r_info) != kRelative) continue;
      for (const auto& a : arrays_) {
        if (r.r_offset >= a.first && r.r_offset - a.first < a.second && !executable(uint64_t(r.r_addend))) {
          fail("corrupt relocation ", i, ": an init/fini function (", uint64_t(r.r_addend),
               ") is outside the executable segments");
        }
      }
    }
  }

  // Defined function symbols of the dynamic symbol table (found through the section headers, when present).
  void function_symbols() {
    if (eh_.e_shoff == 0 || eh_.e_shnum == 0) return;
    for (uint64_t i = 1; i < eh_.e_shnum; ++i) {
      Elf64_Shdr sh = read_at<Elf64_Shdr>(data_, eh_.e_shoff + i * sizeof(Elf64_Shdr));
      if (sh.sh_type != SHT_DYNSYM || sh.sh_entsize != sizeof(Elf64_Sym)) continue;
      for (uint64_t k = 1; k < sh.sh_size / sizeof(Elf64_Sym); ++k) {
        Elf64_Sym sym = read_at<Elf64_Sym>(data_, sh.sh_offset + k * sizeof(Elf64_Sym));
        if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF) continue;
        if (!executable(sym.st_value)) {
          fail("corrupt: function symbol ", k, " (at ", sym.st_value, ") is outside the executable segments");
        }
      }
    }
  }

  template <typename Find>
  void relocations(Find& find, int64_t tag, int64_t size_tag, const char* name, bool textrel) {
    uint64_t addr = 0, nbytes = 0, off = 0;
    if (!find(tag, &addr)) return;
    if (!find(size_tag, &nbytes) || nbytes % sizeof(Elf64_Rela) != 0 || !file_offset(addr, nbytes, &off)) {
      fail("corrupt dynamic section: the ", name, " relocations lie outside the file");
    }
    for (uint64_t i = 0; i < nbytes / sizeof(Elf64_Rela); ++i) {
      Elf64_Rela r = read_at<Elf64_Rela>(data_, off + i * sizeof(Elf64_Rela));
      if (ELF64_R_TYPE(r.r_info) == 0) continue;  // R_*_NONE writes nothing
      if (!mapped(r.r_offset, sizeof(uint64_t), !textrel)) {
        fail("corrupt relocation ", i, " of ", name, ": its target ", r.r_offset, " is outside the writable segments");
      }
    }
  }

  const uint8_t* data_;
  uint64_t size_;
  Elf64_Ehdr eh_{};
  Elf64_Phdr dynamic_{};
  std::vector<Elf64_Phdr> loads_;
  std::vector<Elf64_Phdr> tls_;
  std::vector<std::pair<uint64_t, uint64_t>> arrays_;  // init/fini arrays: (address, bytes)
};

}  // namespace

std::string elf_check(const uint8_t* data, uint64_t size) {
  if (data == nullptr || size == 0) return "empty: not an ELF file";
  try {
    Checker(data, size).run();
  } catch (const Failure& f) {
    return f.message;
  }
  return "";
}

}  // namespace hidet
