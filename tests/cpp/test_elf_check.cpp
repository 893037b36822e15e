// The ELF checks made before dlopen (cpp/runtime/elf_check.hpp): a real kernel library passes; a
// cut one (at every length), another file type, another machine and damaged headers, segments and
// dynamic entries are each named, never handed to the loader.
#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "artifact_writer.hpp"
#include "elf_check.hpp"

using namespace hidet_test;

namespace {

std::string library() { return read_file(HIDET_TEST_GRAPH_KERNELS_PATH); }

std::string check(const std::string& bytes) {
  return hidet::elf_check(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

Elf64_Ehdr header(const std::string& bytes) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof(eh));
  return eh;
}

template <typename F>
std::string with_header(F edit) {
  std::string bytes = library();
  Elf64_Ehdr eh = header(bytes);
  edit(eh);
  std::memcpy(&bytes[0], &eh, sizeof(eh));
  return bytes;
}

// The library with `edit` applied to its first program header of type `type`.
template <typename F>
std::string with_segment(uint32_t type, F edit) {
  std::string bytes = library();
  Elf64_Ehdr eh = header(bytes);
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + i * sizeof(ph), sizeof(ph));
    if (ph.p_type != type) continue;
    edit(ph);
    std::memcpy(&bytes[eh.e_phoff + i * sizeof(ph)], &ph, sizeof(ph));
    return bytes;
  }
  return "(no such segment)";
}

// The library with `edit` applied to the header words of its GNU hash table (nbuckets, symoffset, Bloom
// words, Bloom shift), found through the section headers.
template <typename F>
std::string with_gnu_hash(F edit) {
  std::string bytes = library();
  Elf64_Ehdr eh = header(bytes);
  for (int i = 1; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, bytes.data() + eh.e_shoff + i * sizeof(sh), sizeof(sh));
    if (sh.sh_type != SHT_GNU_HASH) continue;
    uint32_t words[4];
    std::memcpy(words, bytes.data() + sh.sh_offset, sizeof(words));
    edit(words);
    std::memcpy(&bytes[sh.sh_offset], words, sizeof(words));
    return bytes;
  }
  return "(no .gnu.hash section)";
}

// The library with `edit` applied to its first dynamic entry of tag `tag`.
template <typename F>
std::string with_dynamic(int64_t tag, F edit) {
  std::string bytes = library();
  Elf64_Ehdr eh = header(bytes);
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + i * sizeof(ph), sizeof(ph));
    if (ph.p_type != PT_DYNAMIC) continue;
    for (uint64_t at = ph.p_offset; at + sizeof(Elf64_Dyn) <= ph.p_offset + ph.p_filesz; at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn d;
      std::memcpy(&d, bytes.data() + at, sizeof(d));
      if (d.d_tag != tag) continue;
      edit(d);
      std::memcpy(&bytes[at], &d, sizeof(d));
      return bytes;
    }
  }
  return "(no such dynamic entry)";
}

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "'" << (text) << "' lacks '" << (part) << "'"

}  // namespace

TEST(ElfCheck, AKernelLibraryPasses) { EXPECT_EQ(check(library()), ""); }

TEST(ElfCheck, EveryTruncationIsFound) {
  std::string bytes = library();
  ASSERT_GT(bytes.size(), 1000u);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    std::string err = check(bytes.substr(0, cut));
    ASSERT_NE(err, "") << "a library cut to " << cut << " of " << bytes.size() << " bytes passed";
  }
  EXPECT_CONTAINS(check(bytes.substr(0, 40)), "truncated: the file has 40 bytes, less than an ELF header");
  EXPECT_CONTAINS(check(bytes.substr(0, bytes.size() - 1)), "truncated: the section headers");
  EXPECT_CONTAINS(check(bytes.substr(0, 3000)), "truncated: PT_LOAD segment");
}

TEST(ElfCheck, NotALibrary) {
  EXPECT_CONTAINS(check(""), "empty");
  EXPECT_CONTAINS(check("not an ELF file at all"), "not an ELF file (bad magic)");
  EXPECT_CONTAINS(check(write_container({{"manifest.json", "{}"}})), "bad magic");
}

TEST(ElfCheck, Header) {
  EXPECT_CONTAINS(check(with_header([](Elf64_Ehdr& e) { e.e_ident[EI_CLASS] = ELFCLASS32; })), "not a 64-bit ELF");
  EXPECT_CONTAINS(check(with_header([](Elf64_Ehdr& e) { e.e_ident[EI_DATA] = ELFDATA2MSB; })), "not a little-endian");
  EXPECT_CONTAINS(check(with_header([](Elf64_Ehdr& e) { e.e_ident[EI_VERSION] = 7; })), "unknown ELF version");
  EXPECT_CONTAINS(check(with_header([](Elf64_Ehdr& e) { e.e_type = ET_EXEC; })), "not a shared library (ELF type 2");
  EXPECT_CONTAINS(check(with_header([](Elf64_Ehdr& e) { e.e_machine = EM_RISCV; })), "built for another machine");
  EXPECT_CONTAINS(check(with_header([](Elf64_Ehdr& e) { e.e_phentsize = 32; })), "e_phentsize 32");
  EXPECT_CONTAINS(check(with_header([](Elf64_Ehdr& e) { e.e_phnum = 0; })), "0 program headers");
  EXPECT_CONTAINS(check(with_header([](Elf64_Ehdr& e) { e.e_phoff = ~0ull - 8; })),
                  "truncated: the program headers");
  EXPECT_CONTAINS(check(with_header([](Elf64_Ehdr& e) { e.e_shoff = 1ull << 40; })),
                  "truncated: the section headers");
  EXPECT_CONTAINS(check(with_header([](Elf64_Ehdr& e) { e.e_shnum = 60000; })), "truncated: the section headers");
  EXPECT_CONTAINS(check(with_header([](Elf64_Ehdr& e) { e.e_shentsize = 1; })), "e_shentsize 1");
}

TEST(ElfCheck, Segments) {
  EXPECT_CONTAINS(check(with_segment(PT_LOAD, [](Elf64_Phdr& p) { p.p_filesz = 1ull << 30; })),
                  "truncated: PT_LOAD segment 0");
  EXPECT_CONTAINS(check(with_segment(PT_LOAD, [](Elf64_Phdr& p) { p.p_offset = ~0ull; })),
                  "truncated: PT_LOAD segment 0");
  EXPECT_CONTAINS(check(with_segment(PT_LOAD, [](Elf64_Phdr& p) { p.p_memsz = 0; p.p_filesz = 8; })),
                  "file size above memory size");
  EXPECT_CONTAINS(check(with_segment(PT_LOAD, [](Elf64_Phdr& p) { p.p_align = 3000; })), "not a power of two");
  EXPECT_CONTAINS(check(with_segment(PT_LOAD, [](Elf64_Phdr& p) { p.p_vaddr = ~0ull - 10; })), "overflow");
  EXPECT_CONTAINS(check(with_segment(PT_LOAD, [](Elf64_Phdr& p) { p.p_vaddr += 8; })),
                  "address and file offset disagree");
  EXPECT_CONTAINS(check(with_segment(PT_DYNAMIC, [](Elf64_Phdr& p) { p.p_type = PT_NULL; })),
                  "0 PT_DYNAMIC segments");
  EXPECT_CONTAINS(check(with_segment(PT_DYNAMIC, [](Elf64_Phdr& p) { p.p_vaddr = 1ull << 40; })),
                  "PT_DYNAMIC segment: not inside");
  EXPECT_CONTAINS(check(with_segment(PT_DYNAMIC, [](Elf64_Phdr& p) { p.p_filesz = 16; })), "no DT_NULL");
}

TEST(ElfCheck, DynamicEntries) {
  EXPECT_CONTAINS(check(with_dynamic(DT_RELAENT, [](Elf64_Dyn& d) { d.d_un.d_val = 16; })), "DT_RELAENT");
  EXPECT_CONTAINS(check(with_dynamic(DT_RELAENT, [](Elf64_Dyn& d) { d.d_tag = DT_DEBUG; })), "DT_RELAENT");
  EXPECT_CONTAINS(check(with_dynamic(DT_SYMENT, [](Elf64_Dyn& d) { d.d_un.d_val = 1; })), "DT_SYMENT 1");
  EXPECT_CONTAINS(check(with_dynamic(DT_PLTREL, [](Elf64_Dyn& d) { d.d_un.d_val = DT_REL; })), "DT_PLTREL");
  EXPECT_CONTAINS(check(with_dynamic(DT_STRSZ, [](Elf64_Dyn& d) { d.d_un.d_val = 1ull << 40; })),
                  "string table lies outside");
  EXPECT_CONTAINS(check(with_dynamic(DT_NEEDED, [](Elf64_Dyn& d) { d.d_un.d_val = 1ull << 40; })),
                  "outside the string table");
  EXPECT_CONTAINS(check(with_dynamic(DT_SYMTAB, [](Elf64_Dyn& d) { d.d_un.d_val = 1ull << 40; })),
                  "no symbol table");
  EXPECT_CONTAINS(check(with_dynamic(DT_RELASZ, [](Elf64_Dyn& d) { d.d_un.d_val = 1ull << 40; })),
                  "DT_RELA relocations lie outside the file");
  EXPECT_CONTAINS(check(with_dynamic(DT_INIT_ARRAY, [](Elf64_Dyn& d) { d.d_un.d_val = 1ull << 40; })),
                  "init array lies outside");
}

// The code segment's type damaged (found by tests/runtime/fuzz_artifacts.py): ld.so maps no code, and
// calling DT_INIT, an init-array function or a kernel there was a SIGSEGV inside dlopen.
TEST(ElfCheck, CodeOutsideTheExecutableSegments) {
  std::string bytes = library();
  Elf64_Ehdr eh = header(bytes);
  bool found = false;
  for (int i = 0; i < eh.e_phnum && !found; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + i * sizeof(ph), sizeof(ph));
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    ph.p_type = 0xff000001;  // what the fuzzer wrote: an unknown type, so the segment is not loaded
    std::memcpy(&bytes[eh.e_phoff + i * sizeof(ph)], &ph, sizeof(ph));
    found = true;
  }
  ASSERT_TRUE(found);
  EXPECT_CONTAINS(check(bytes), "lies outside the PT_LOAD segments");  // the sections in it (checked first)
  EXPECT_CONTAINS(check(with_dynamic(DT_INIT, [](Elf64_Dyn& d) { d.d_un.d_val = 0; })),
                  "DT_INIT (0) is outside the executable segments");
}

// Found by the long fuzz run: a PT_GNU_RELRO reaching past its segment (ld.so then made .data/.bss
// read-only: SIGSEGV on the next write), and a read-only data segment's type damaged (not mapped).
TEST(ElfCheck, SegmentsTheSectionsNeed) {
  EXPECT_CONTAINS(check(with_segment(PT_GNU_RELRO, [](Elf64_Phdr& p) { p.p_memsz += 1 << 16; })),
                  "PT_GNU_RELRO segment");
  EXPECT_CONTAINS(check(with_segment(PT_NOTE, [](Elf64_Phdr& p) { p.p_memsz |= 0xff00000000000000ull; })),
                  "note segment");
  EXPECT_CONTAINS(check(with_segment(PT_LOAD, [](Elf64_Phdr& p) { p.p_flags = 0; })),
                  "without the permissions it needs");
  std::string bytes = library();
  Elf64_Ehdr eh = header(bytes);
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + i * sizeof(ph), sizeof(ph));
    if (ph.p_type != PT_LOAD || (ph.p_flags & (PF_X | PF_W)) || ph.p_offset == 0) continue;
    ph.p_type = 0x1000001;  // the rodata segment, no longer loaded
    std::memcpy(&bytes[eh.e_phoff + i * sizeof(ph)], &ph, sizeof(ph));
    EXPECT_CONTAINS(check(bytes), "lies outside the PT_LOAD segments");
    return;
  }
  FAIL() << "no read-only data segment";
}

// Found by the long fuzz run: a damaged GNU hash table (its Bloom filter's word count no power of two) was an
// assertion inside ld.so that exited the process; buckets or chains past the file would be read out of bounds.
TEST(ElfCheck, GnuHashTable) {

  EXPECT_EQ(check(with_gnu_hash([](uint32_t*) {})), "");
  EXPECT_CONTAINS(check(with_gnu_hash([](uint32_t* w) { w[2] = 3; })), "3 Bloom filter words (a power of two expected)");
  EXPECT_CONTAINS(check(with_gnu_hash([](uint32_t* w) { w[0] = 0x10000000; })), "lie outside the file");
  EXPECT_CONTAINS(check(with_gnu_hash([](uint32_t* w) { w[1] += 1000; })), "corrupt GNU hash table");
}
