// SHA-256 for digest pinning (runtime.h: hidet_graph_load_pinned; docs/runtime.md, "Trust"). Computed
// by OpenSSL's libcrypto, loaded at run time like libcuda (no build-time dependency; a machine without
// it can do everything but pin). Internal to libhidet_runtime.so.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace hidet {
namespace sha256 {

using Digest = std::array<uint8_t, 32>;

// The SHA-256 of `size` bytes at `data`; throws hidet::Error when libcrypto cannot be loaded.
Digest of(const void* data, uint64_t size);

// 64 lowercase hex digits.
std::string hex(const Digest& d);

// A pinned digest as the caller wrote it: exactly 64 hex digits, either case (surrounding spaces are
// not accepted: a digest pasted with junk is a mistake worth reporting). Throws naming the text.
Digest parse(const char* text);

// Throws "artifact <source>: its SHA-256 is <actual>, expected <pinned> ..." unless the bytes match.
void check_pinned(const void* data, uint64_t size, const char* expected_hex, const std::string& source);

}  // namespace sha256
}  // namespace hidet
