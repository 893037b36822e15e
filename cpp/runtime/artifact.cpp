// The artifact container (docs/artifact.md): magic, version, entry table, bounds and hashes are all
// checked before any entry is used, so a truncated or corrupt file is an error, never a crash.
#include "artifact.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "hidet/runtime.h"
#include "hidet/runtime/error.hpp"
#include "sha256.hpp"

namespace hidet {
namespace artifact {
namespace {

constexpr uint64_t kHeaderSize = 16;      // magic, version, entry count
constexpr uint64_t kEntryFixedSize = 28;  // name length + offset + size + hash
constexpr uint32_t kMaxNameLength = 4096;

uint32_t read_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t read_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// The name as it may be printed: non-printable bytes as '?'.
std::string printable(const uint8_t* p, uint32_t n) {
  std::string s(reinterpret_cast<const char*>(p), n);
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return s;
}

}  // namespace

std::unique_ptr<Container> Container::open_file(const std::string& path, const char* pinned_sha256) {
  if (pinned_sha256 != nullptr) sha256::parse(pinned_sha256);  // a malformed digest first: it is the caller's mistake
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  HIDET_CHECK(fd >= 0, "cannot open artifact ", path, ": ", std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw Error(str_cat("cannot read artifact ", path, ": ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(str_cat("cannot read artifact ", path, ": not a regular file"));
  }
  std::unique_ptr<Container> c(new Container());
  c->source_ = path;
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > 0) {
    // Mapped rather than read: weights may be large, and are only copied once, to the device.
    void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    HIDET_CHECK(m != MAP_FAILED, "cannot map artifact ", path, ": ", std::strerror(err));
    c->mapping_ = m;
    c->mapping_size_ = size;
  } else {
    ::close(fd);
  }
  if (pinned_sha256 != nullptr) sha256::check_pinned(c->mapping_, size, pinned_sha256, path);
  c->parse(static_cast<const uint8_t*>(c->mapping_), size);
  return c;
}

std::unique_ptr<Container> Container::from_memory(const void* data, uint64_t size, std::string source,
                                                  const char* pinned_sha256, bool check_hashes) {
  HIDET_CHECK(data != nullptr || size == 0, "artifact ", source, ": the buffer is NULL");
  if (pinned_sha256 != nullptr) sha256::check_pinned(data, size, pinned_sha256, source);
  std::unique_ptr<Container> c(new Container());
  c->source_ = std::move(source);
  c->parse(static_cast<const uint8_t*>(data), size, check_hashes);
  return c;
}

Container::~Container() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_size_);
}

const Entry* Container::find(const std::string& name) const {
  for (const Entry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

void Container::parse(const uint8_t* data, uint64_t size, bool check_hashes) {
  const std::string at = str_cat("artifact ", source_);
  // Magic: a short file that starts like an artifact is truncated; anything else is not one.
  uint64_t magic_bytes = size < sizeof(kMagic) ? size : sizeof(kMagic);
  HIDET_CHECK(size > 0 && std::memcmp(data, kMagic, magic_bytes) == 0, at,
              " is not a hidet artifact (bad magic: it does not start with \"HIDETART\")");
  HIDET_CHECK(size >= kHeaderSize, at, " is truncated: the header needs ", kHeaderSize, " bytes but the file has ",
              size, " bytes");
  uint32_t version = read_u32(data + 8);
  HIDET_CHECK(version == kContainerVersion, at, " has container version ", version, "; this runtime reads version ",
              kContainerVersion);
  uint32_t count = read_u32(data + 12);
  HIDET_CHECK(kHeaderSize + uint64_t(count) * kEntryFixedSize <= size, at, " is truncated: its entry table of ",
              count, " entries needs at least ", kHeaderSize + uint64_t(count) * kEntryFixedSize,
              " bytes but the file has ", size, " bytes");

  // The entry table, every field checked before it is used.
  std::vector<uint64_t> hashes;
  std::set<std::string> names;
  uint64_t pos = kHeaderSize;
  for (uint32_t i = 0; i < count; ++i) {
    HIDET_CHECK(pos + 4 <= size, at, " is truncated: the header of entry ", i, " ends past byte ", size);
    uint32_t n = read_u32(data + pos);
    HIDET_CHECK(n > 0 && n <= kMaxNameLength, at, " is corrupt: entry ", i, " has a name of ", n, " bytes");
    HIDET_CHECK(pos + 4 + n + 24 <= size, at, " is truncated: the header of entry ", i, " ends at byte ",
                pos + 4 + n + 24, " but the file has ", size, " bytes");
    Entry e;
    e.name = printable(data + pos + 4, n);
    pos += 4 + n;
    uint64_t offset = read_u64(data + pos);
    e.size = read_u64(data + pos + 8);
    hashes.push_back(read_u64(data + pos + 16));
    pos += 24;
    HIDET_CHECK(names.insert(e.name).second, at, " is corrupt: entry ", e.name, " appears twice");
    HIDET_CHECK(offset % kEntryAlignment == 0, at, " is corrupt: entry ", e.name, " starts at byte ", offset,
                ", not a multiple of ", kEntryAlignment);
    // offset > size first, so offset + size cannot overflow in the second test.
    HIDET_CHECK(offset <= size && e.size <= size - offset, at, " is truncated: entry ", e.name, " ends at byte ",
                (offset > UINT64_MAX - e.size ? UINT64_MAX : offset + e.size), " but the file has ", size, " bytes");
    e.data = data + offset;
    entries_.push_back(std::move(e));
  }
  for (const Entry& e : entries_) {
    HIDET_CHECK(e.data >= data + pos || e.size == 0, at, " is corrupt: entry ", e.name,
                " overlaps the entry table");
  }
  // Hashes last: every entry is known to lie inside the file.
  for (size_t i = 0; i < entries_.size(); ++i) {
    HIDET_CHECK(!check_hashes || hidet_fnv1a64(entries_[i].data, entries_[i].size) == hashes[i], at,
                " is corrupt: hash mismatch in ", entries_[i].name);
    entries_[i].hash = hashes[i];
  }
}

namespace {
struct DtypeEntry {
  const char* name;
  uint8_t code, bits;
};
constexpr DtypeEntry kDtypes[] = {
    {"float32", kDLFloat, 32}, {"float16", kDLFloat, 16}, {"bfloat16", kDLBfloat, 16}, {"float64", kDLFloat, 64},
    {"int8", kDLInt, 8},       {"int16", kDLInt, 16},     {"int32", kDLInt, 32},       {"int64", kDLInt, 64},
    {"uint8", kDLUInt, 8},     {"bool", kDLBool, 8},
};
}  // namespace

bool dtype_to_dl(const std::string& dtype, DLDataType* out) {
  for (const DtypeEntry& e : kDtypes) {
    if (dtype == e.name) {
      *out = DLDataType{e.code, e.bits, 1};
      return true;
    }
  }
  return false;
}

const char* dtype_from_dl(DLDataType t) {
  for (const DtypeEntry& e : kDtypes) {
    if (t.code == e.code && t.bits == e.bits && t.lanes == 1) return e.name;
  }
  return nullptr;
}

uint64_t dtype_nbytes(const std::string& dtype) {
  DLDataType t;
  return dtype_to_dl(dtype, &t) ? t.bits / 8 : 0;
}

}  // namespace artifact
}  // namespace hidet
