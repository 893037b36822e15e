// Kernel libraries of artifacts, loaded once per process per content and shared by the graphs
// that use them. Internal to libhidet_runtime.so.
//
// Why process-wide: the dynamic loader is. A loaded library's code and memory mappings belong to
// the process, so two graphs loaded from the same artifact (or from two artifacts sharing a
// library) can share one loaded copy only through an object that outlives each graph. The registry is that one object: a map from content to the
// loaded library, guarded by a mutex, holding weak references only; a library is dlclose'd (and
// its memory file or temporary file removed) when the last graph using it is freed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hidet/runtime/kernel_library.hpp"

namespace hidet {

// One kernel library loaded from an artifact entry's bytes, through a memory file (kept open while
// loaded, so its /proc/self/fd path names no other library) or, where memory files cannot be mapped
// executable, a private temporary file (kept while loaded, so no later temporary file takes its
// name, and removed when unloaded).
class LoadedLibrary : public std::enable_shared_from_this<LoadedLibrary> {
 public:
  ~LoadedLibrary();
  LoadedLibrary(const LoadedLibrary&) = delete;
  LoadedLibrary& operator=(const LoadedLibrary&) = delete;
  // The kernel `function` of this library (KernelLibrary::get_kernel), holding this loaded library alive.
  Kernel kernel(const std::string& function) const;
  const KernelLibrary& library() const { return *library_; }

 private:
  friend class LibraryRegistry;
  LoadedLibrary() = default;
  std::shared_ptr<KernelLibrary> library_;
  bool registered_ = false;
  uint64_t hash_ = 0, size_ = 0;
  int fd_ = -1;           // the memory file or temporary file holding the bytes
  std::string tmp_path_;  // the temporary file (empty for a memory file)
};

class LibraryRegistry {
 public:
  static LibraryRegistry& instance();

  // The library with these bytes (`hash`: their FNV-1a-64, as the container stores it): the copy
  // already loaded when one is (its bytes compared, not only its hash), else a new one, checked
  // (elf_check) before dlopen. Throws hidet::Error starting with `what` (e.g. "artifact m.hidet:
  // cannot load kernel library kernels/0.so") for a damaged library or one that cannot be loaded.
  std::shared_ptr<LoadedLibrary> acquire(const uint8_t* data, uint64_t size, uint64_t hash, const std::string& what);

  // Keep the process's OpenMP runtime loaded for good once a kernel library has brought it in
  // (see the definition for why). Called after every dlopen of a kernel library.
  void pin_openmp_runtime();

 private:
  friend class LoadedLibrary;
  LibraryRegistry() = default;
  std::shared_ptr<LoadedLibrary> load(const uint8_t* data, uint64_t size, const std::string& what);
  void forget(const LoadedLibrary* library);

  std::mutex mutex_;  // guards loaded_; held while a library is loaded or unloaded
  std::map<std::pair<uint64_t, uint64_t>, std::vector<std::pair<const LoadedLibrary*, std::weak_ptr<LoadedLibrary>>>>
      loaded_;  // by (hash, size)
  std::mutex pin_mutex_;
  std::set<std::string> pinned_;  // the OpenMP runtimes pinned so far
};

}  // namespace hidet
