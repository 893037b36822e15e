// FNV-1a 64-bit: the artifact container's per-entry checksum (docs/artifact.md).
#include "hidet/runtime.h"

extern "C" uint64_t hidet_fnv1a64(const void* data, uint64_t nbytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t i = 0; i < nbytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}
