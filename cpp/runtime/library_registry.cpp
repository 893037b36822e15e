// The process-wide registry of artifacts' kernel libraries (library_registry.hpp).
#include "library_registry.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "elf_check.hpp"
#include "hidet/runtime/error.hpp"

namespace hidet {
namespace {

// Write all of `size` bytes to fd; false on failure (errno set).
bool write_all(int fd, const uint8_t* data, uint64_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<uint64_t>(n);
  }
  return true;
}

// Whether the file `fd` holds exactly `data[0:size]`.
bool same_bytes(int fd, const uint8_t* data, uint64_t size) {
  uint8_t buffer[1 << 16];
  uint64_t pos = 0;
  while (pos < size) {
    uint64_t want = size - pos < sizeof(buffer) ? size - pos : sizeof(buffer);
    ssize_t n = ::pread(fd, buffer, want, static_cast<off_t>(pos));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || std::memcmp(buffer, data + pos, static_cast<size_t>(n)) != 0) return false;
    pos += static_cast<uint64_t>(n);
  }
  uint8_t extra;
  return ::pread(fd, &extra, 1, static_cast<off_t>(size)) == 0;
}

// An anonymous in-memory file holding the bytes, whose /proc/self/fd path names no library that is
// loaded already: dlopen matches libraries by path before it opens anything, so a path that a
// library (closed but never unloaded, such as one linked -z nodelete) had used would give back that
// stale library. Returns -1 when memory files are unavailable.
int memfd_with(const uint8_t* data, uint64_t size) {
  std::vector<int> stale;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    int candidate = ::memfd_create("hidet-kernels", MFD_CLOEXEC);
    if (candidate < 0) break;
    std::string path = "/proc/self/fd/" + std::to_string(candidate);
    void* loaded = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    dlerror();  // an empty file is no library: clear that error, it is expected
    if (loaded != nullptr) {
      dlclose(loaded);
      stale.push_back(candidate);  // kept open until we are done, so the next fd gets another number
      continue;
    }
    if (!write_all(candidate, data, size)) {
      ::close(candidate);
      break;
    }
    fd = candidate;
  }
  for (int s : stale) ::close(s);
  return fd;
}

}  // namespace

LibraryRegistry& LibraryRegistry::instance() {
  // Never destroyed: graphs (and their libraries) may still be freed while the process exits, after
  // static destructors would have run.
  static LibraryRegistry* registry = new LibraryRegistry();
  return *registry;
}

LoadedLibrary::~LoadedLibrary() {
  if (registered_) LibraryRegistry::instance().forget(this);
  library_.reset();  // dlclose; the file is closed after, so its path names nothing while loaded
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

Kernel LoadedLibrary::kernel(const std::string& function) const {
  Kernel k = library_->get_kernel(function);
  // Aliasing: the kernel holds this LoadedLibrary (and so its file and registry entry), not only the dlopen handle.
  return Kernel(std::shared_ptr<const KernelLibrary>(shared_from_this(), library_.get()), function, k.fn(),
                k.signature());
}

void LibraryRegistry::forget(const LoadedLibrary* library) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = loaded_.find({library->hash_, library->size_});
  if (it == loaded_.end()) return;
  auto& same = it->second;
  for (size_t i = 0; i < same.size(); ++i) {
    if (same[i].first == library) {
      same.erase(same.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (same.empty()) loaded_.erase(it);
}

std::shared_ptr<LoadedLibrary> LibraryRegistry::acquire(const uint8_t* data, uint64_t size, uint64_t hash,
                                                        const std::string& what) {
  // Declared before the lock: a library found here whose last other user lets go meanwhile is freed
  // (and forgotten, which takes the lock) only after the lock is released.
  std::vector<std::shared_ptr<LoadedLibrary>> candidates;
  std::shared_ptr<LoadedLibrary> fresh;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = loaded_.find({hash, size});
  if (it != loaded_.end()) {
    for (const auto& entry : it->second) {
      std::shared_ptr<LoadedLibrary> lib = entry.second.lock();
      if (!lib) continue;  // being freed: it forgets itself
      candidates.push_back(lib);
      if (same_bytes(lib->fd_, data, size)) return lib;  // equal bytes, not only an equal hash
    }
  }
  std::string damage = elf_check(data, size);
  HIDET_CHECK(damage.empty(), what, ": not a loadable shared library: ", damage);
  fresh = load(data, size, what);
  fresh->hash_ = hash;
  fresh->size_ = size;
  loaded_[{hash, size}].emplace_back(fresh.get(), fresh);
  fresh->registered_ = true;
  return fresh;
}

std::shared_ptr<LoadedLibrary> LibraryRegistry::load(const uint8_t* data, uint64_t size, const std::string& what) {
  std::shared_ptr<LoadedLibrary> lib(new LoadedLibrary());
  std::string memfd_error;
  lib->fd_ = memfd_with(data, size);
  if (lib->fd_ >= 0) {
    try {
      lib->library_ = KernelLibrary::load("/proc/self/fd/" + std::to_string(lib->fd_));
      return lib;
    } catch (const Error& e) {
      memfd_error = e.what();
      ::close(lib->fd_);
      lib->fd_ = -1;
    }
  }
  // Memory files cannot be mapped executable here (e.g. noexec policies): a private temporary file.
  const char* tmpdir = std::getenv("TMPDIR");
  std::string path = str_cat(tmpdir && *tmpdir ? tmpdir : "/tmp", "/hidet-kernels-XXXXXX");
  int fd = ::mkstemp(path.data());
  HIDET_CHECK(fd >= 0, what, ": cannot create a temporary file ", path, ": ", std::strerror(errno),
              memfd_error.empty() ? "" : "; from memory: ", memfd_error);
  lib->fd_ = fd;
  lib->tmp_path_ = path;  // removed by ~LoadedLibrary, also when loading fails below
  HIDET_CHECK(write_all(fd, data, size), what, ": cannot write ", path, ": ", std::strerror(errno));
  try {
    lib->library_ = KernelLibrary::load(path);
  } catch (const Error& e) {
    throw Error(str_cat(what, ": ", e.what()));
  }
  return lib;
}

// The OpenMP runtime stays loaded for the life of the process, on purpose. Its worker threads
// outlive every parallel region, sleeping (or spinning) inside the runtime's own code; if the last
// kernel library needing it were unloaded, dlclose would unmap that code under them and they would
// crash on waking. (This is why CPU kernel libraries were once linked -z nodelete, which kept every
// library loaded forever instead: a leak of ~20 mappings per graph load.) The kernel libraries
// themselves can be unloaded: a parallel region ends with a barrier that every worker reaches only
// after leaving the library's outlined code, before the kernel returns.
void LibraryRegistry::pin_openmp_runtime() {
  static const char* const kRuntimes[] = {"libgomp.so.1", "libomp.so", "libomp.so.5", "libiomp5.so"};
  std::lock_guard<std::mutex> lock(pin_mutex_);
  for (const char* name : kRuntimes) {
    if (pinned_.count(name)) continue;
    // RTLD_NOLOAD: only a runtime that is loaded already; RTLD_NODELETE: never unloaded from now on.
    if (dlopen(name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE) != nullptr) pinned_.insert(name);
  }
  dlerror();  // the runtimes that are not loaded leave errors: not ours to report
}

}  // namespace hidet
