// Checking a kernel library's bytes before dlopen: a truncated or damaged shared object given to the
// dynamic loader can kill the process (SIGBUS on a segment past the end of the file, an assertion
// inside ld.so that exits, a NULL dereference on a missing dynamic entry) instead of failing.
//
// What is checked (64-bit little-endian ELF of this machine's architecture):
//  - the ELF header: magic, class, byte order, version, type ET_DYN, machine, header sizes;
//  - the program headers inside the file; every PT_LOAD segment's file bytes inside the file, its
//    file size within its memory size, its alignment a power of two matching its address, the
//    segments in ascending, non-overlapping address order; PT_DYNAMIC, PT_TLS inside the file;
//  - the section header table (and every section's bytes) inside the file;
//  - the dynamic section: inside a loaded segment and ended by DT_NULL; the entries the loader
//    asserts on (DT_RELAENT, DT_SYMENT, DT_PLTREL); the string and relocation tables inside
//    file-backed bytes of a segment; the names of needed libraries, the soname and the search
//    paths inside the string table; every relocation's target inside a writable segment.
// This finds damage (a cut file, an entry that is not a library, flipped header bytes); it does not
// make a crafted library safe: a library is native code, and only trusted artifacts should be
// loaded (docs/runtime.md).
// Internal to libhidet_runtime.so.
#pragma once

#include <cstdint>
#include <string>

namespace hidet {

// "" when `data[0:size]` passes the checks above, else what is wrong, e.g.
// "truncated: PT_LOAD segment 1 (bytes 4096..12288) ends past the end of the file (9000 bytes)".
std::string elf_check(const uint8_t* data, uint64_t size);

}  // namespace hidet
