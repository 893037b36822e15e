// Writing artifact containers (docs/artifact.md) from the C++ tests. Unlike hidet's Python writer,
// the last entry is not padded, so that cutting the file anywhere truncates an entry.
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "hidet/runtime.h"

namespace hidet_test {

using Entries = std::vector<std::pair<std::string, std::string>>;  // (name, bytes)

inline void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

inline void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

inline std::string write_container(const Entries& entries, uint32_t version = 1) {
  auto align = [](uint64_t n) { return (n + 63) / 64 * 64; };
  uint64_t offset = 16;
  for (const auto& e : entries) offset += 4 + e.first.size() + 24;
  offset = align(offset);
  std::string out = "HIDETART";
  put_u32(out, version);
  put_u32(out, static_cast<uint32_t>(entries.size()));
  std::vector<uint64_t> offsets;
  for (const auto& e : entries) {
    put_u32(out, static_cast<uint32_t>(e.first.size()));
    out += e.first;
    put_u64(out, offset);
    put_u64(out, e.second.size());
    put_u64(out, hidet_fnv1a64(e.second.data(), e.second.size()));
    offsets.push_back(offset);
    offset = align(offset + e.second.size());
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    out.resize(offsets[i], '\0');
    out += entries[i].second;
  }
  return out;
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// The bytes of `n` floats.
inline std::string float_bytes(const std::vector<float>& values, size_t pad_to = 0) {
  std::string s(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  if (s.size() < pad_to) s.resize(pad_to, '\0');
  return s;
}

// Replace the first occurrence of `from` (which must occur) in `text`.
inline std::string replace(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  if (at == std::string::npos) return "(replace: '" + from + "' not found)";
  return text.replace(at, from.size(), to);
}

}  // namespace hidet_test
