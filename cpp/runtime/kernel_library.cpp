// Kernel libraries: dlopen a shared object, check its kernel ABI version, look kernels up by name.
#include "hidet/runtime/kernel_library.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "elf_check.hpp"
#include "hidet/runtime/error.hpp"
#include "library_registry.hpp"

namespace hidet {

namespace {
std::string dl_error() {
  const char* err = dlerror();
  return err ? err : "unknown error";
}

// "" when the file at `path` passes elf_check, else why not (a damaged library given to dlopen can
// kill the process instead of failing).
std::string check_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return str_cat("cannot open it: ", std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return "not a regular file";
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  void* m = size > 0 ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  int err = errno;
  ::close(fd);
  if (m == MAP_FAILED) return str_cat("cannot map it: ", std::strerror(err));
  std::string damage = elf_check(static_cast<const uint8_t*>(m), size);
  if (m != nullptr) ::munmap(m, size);
  return damage;
}

}  // namespace

std::shared_ptr<KernelLibrary> KernelLibrary::load(const std::string& path) {
  struct stat st;
  HIDET_CHECK(::stat(path.c_str(), &st) == 0, "kernel library not found: ", path);
  std::string damage = check_file(path);
  HIDET_CHECK(damage.empty(), "cannot load kernel library ", path, ": not a loadable shared library: ", damage);
  // RTLD_LOCAL: libraries may export the same kernel names without clashing.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  HIDET_CHECK(handle != nullptr, "cannot load kernel library ", path, ": ", dl_error());
  LibraryRegistry::instance().pin_openmp_runtime();  // before this library can be closed (see there)
  // Owned from here on, so an error below closes it again.
  std::shared_ptr<KernelLibrary> library(new KernelLibrary(path, handle));

  auto version_fn = reinterpret_cast<hidet_kernel_abi_version_fn>(dlsym(handle, "hidet_kernel_abi_version"));
  HIDET_CHECK(version_fn != nullptr, path, " is not a hidet kernel library: it exports no hidet_kernel_abi_version");
  int32_t version = version_fn();
  HIDET_CHECK(version == HIDET_KERNEL_ABI_VERSION, path, " was built for kernel ABI version ", version,
              ", this runtime expects ", HIDET_KERNEL_ABI_VERSION, "; rebuild it (clear the hidet cache)");
  library->last_error_fn_ = reinterpret_cast<hidet_kernel_last_error_fn>(dlsym(handle, "hidet_kernel_last_error"));
  return library;
}

KernelLibrary::KernelLibrary(std::string path, void* handle) : path_(std::move(path)), handle_(handle) {}

KernelLibrary::~KernelLibrary() { dlclose(handle_); }

void* KernelLibrary::own_symbol(const std::string& name) const {
  void* sym = dlsym(handle_, name.c_str());
  if (sym == nullptr) return nullptr;
  // dlsym also searches the library's dependencies (a manifest naming "abort" would find libc's): only a
  // symbol defined in this library's own object is one of its kernels.
  Dl_info found{}, own{};
  void* anchor = dlsym(handle_, "hidet_kernel_abi_version");
  if (anchor == nullptr || dladdr(sym, &found) == 0 || dladdr(anchor, &own) == 0) return nullptr;
  return found.dli_fbase == own.dli_fbase ? sym : nullptr;
}

namespace {

// The library's own bookkeeping entries, which do not take the kernel ABI's arguments.
bool is_bookkeeping(const std::string& name) {
  return name == "hidet_kernel_abi_version" || name == "hidet_kernel_last_error" ||
         name.rfind(HIDET_KERNEL_SIGNATURE_PREFIX, 0) == 0;
}

}  // namespace

std::string KernelLibrary::why_not_kernel(const std::string& name) const {
  if (is_bookkeeping(name) || own_symbol(name) == nullptr) {
    return str_cat("exports no kernel '", name, "'",
                   dlsym(handle_, name.c_str()) != nullptr ? " (the name is one of its dependencies' or its own "
                                                             "bookkeeping, not a kernel)" : "");
  }
  if (own_symbol(HIDET_KERNEL_SIGNATURE_PREFIX + name) == nullptr) {
    return str_cat("does not declare kernel '", name, "': it exports no ", HIDET_KERNEL_SIGNATURE_PREFIX, name,
                   " (a kernel library declares each kernel's buffers and dims, kernel_abi.h; rebuild it with this "
                   "hidet)");
  }
  return "";
}

bool KernelLibrary::has_kernel(const std::string& name) const { return why_not_kernel(name).empty(); }

Kernel KernelLibrary::get_kernel(const std::string& name) const {
  std::string why = why_not_kernel(name);
  HIDET_CHECK(why.empty(), path_, " ", why);
  auto fn = reinterpret_cast<hidet_kernel_fn>(own_symbol(name));
  auto signature_fn = reinterpret_cast<hidet_kernel_signature_fn>(own_symbol(HIDET_KERNEL_SIGNATURE_PREFIX + name));
  const char* signature = signature_fn();
  HIDET_CHECK(signature != nullptr, path_, ": the signature of kernel '", name, "' is NULL");
  return Kernel(shared_from_this(), name, fn, signature);
}

std::string KernelLibrary::last_error() const {
  if (last_error_fn_ == nullptr) return "(no message: the library exports no hidet_kernel_last_error)";
  const char* msg = last_error_fn_();
  return msg ? msg : "(no message)";
}

void Kernel::launch(void* const* buffers, int32_t num_buffers, const int64_t* dims, int32_t num_dims,
                    void* stream) const {
  int32_t code = fn_(buffers, num_buffers, dims, num_dims, stream);
  HIDET_CHECK(code == 0, "kernel '", name_, "' (", library_->path(), ") failed with code ", code, ": ",
              library_->last_error());
}

}  // namespace hidet
