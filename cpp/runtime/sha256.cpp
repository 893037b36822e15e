// SHA-256 through OpenSSL's libcrypto (EVP_Digest), loaded with dlopen on first use. Why not link it:
// the runtime's only build dependencies are a C++ compiler and CMake, and one build must run on machines
// with OpenSSL 3 or 1.1; EVP_Digest and EVP_sha256 have had the same C signatures in both. Why not our
// own SHA-256: a digest that guards what native code gets loaded should come from a maintained library.
#include "sha256.hpp"

#include <dlfcn.h>

#include <cctype>
#include <cstring>
#include <mutex>

#include "hidet/runtime/error.hpp"

namespace hidet {
namespace sha256 {
namespace {

// <openssl/evp.h>: const EVP_MD* EVP_sha256(void);
//   int EVP_Digest(const void* data, size_t count, unsigned char* md, unsigned int* size,
//                  const EVP_MD* type, ENGINE* impl);
using EvpSha256Fn = const void* (*)();
using EvpDigestFn = int (*)(const void*, size_t, unsigned char*, unsigned int*, const void*, void*);

struct Crypto {
  EvpSha256Fn evp_sha256 = nullptr;
  EvpDigestFn evp_digest = nullptr;
  std::string error;  // why it could not be loaded
};

const Crypto& crypto() {
  static Crypto c;
  static std::once_flag once;
  std::call_once(once, [] {
    // Already loaded (e.g. by Python's hashlib) or the system's, newest first. Never unloaded.
    std::string tried;
    for (const char* name : {"libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.so"}) {
      void* lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib == nullptr) {
        const char* e = ::dlerror();
        tried += str_cat(tried.empty() ? "" : "; ", e ? e : name);
        continue;
      }
      auto sha = reinterpret_cast<EvpSha256Fn>(::dlsym(lib, "EVP_sha256"));
      auto digest = reinterpret_cast<EvpDigestFn>(::dlsym(lib, "EVP_Digest"));
      if (sha != nullptr && digest != nullptr) {
        c.evp_sha256 = sha;
        c.evp_digest = digest;
        return;
      }
      tried += str_cat(tried.empty() ? "" : "; ", name, " lacks EVP_Digest or EVP_sha256");
    }
    c.error = str_cat("SHA-256 needs OpenSSL's libcrypto (libcrypto.so.3 or libcrypto.so.1.1; on Debian/Ubuntu "
                      "the package libssl3), which could not be loaded: ",
                      tried);
  });
  return c;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Digest of(const void* data, uint64_t size) {
  const Crypto& c = crypto();
  HIDET_CHECK(c.evp_digest != nullptr, c.error);
  static const unsigned char empty = 0;  // EVP_Digest wants a valid pointer even for 0 bytes
  Digest d{};
  unsigned int n = 0;
  const void* md = c.evp_sha256();
  HIDET_CHECK(md != nullptr, "SHA-256: libcrypto's EVP_sha256() returned NULL");
  int ok = c.evp_digest(size == 0 ? &empty : data, static_cast<size_t>(size), d.data(), &n, md, nullptr);
  HIDET_CHECK(ok == 1 && n == d.size(), "SHA-256: libcrypto's EVP_Digest failed");
  return d;
}

std::string hex(const Digest& d) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

Digest parse(const char* text) {
  std::string t = text;
  std::string shown = t.size() > 80 ? t.substr(0, 80) + "..." : t;
  for (char& ch : shown) {
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
  }
  HIDET_CHECK(t.size() == 64, "the pinned SHA-256 '", shown, "' is not 64 hex digits (it has ", t.size(),
              " characters)");
  Digest d{};
  for (size_t i = 0; i < 32; ++i) {
    int hi = hex_value(t[2 * i]), lo = hex_value(t[2 * i + 1]);
    HIDET_CHECK(hi >= 0 && lo >= 0, "the pinned SHA-256 '", shown, "' is not 64 hex digits (character ",
                (hi < 0 ? 2 * i : 2 * i + 1), ")");
    d[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return d;
}

void check_pinned(const void* data, uint64_t size, const char* expected_hex, const std::string& source) {
  Digest want = parse(expected_hex);
  Digest got = of(data, size);
  HIDET_CHECK(got == want, "artifact ", source, ": its SHA-256 is ", hex(got), ", expected ", hex(want),
              " (the pinned digest): the file is not the artifact that was pinned; nothing of it was loaded");
}

}  // namespace sha256
}  // namespace hidet
