// Kernel libraries: shared objects following the uniform kernel ABI (hidet/kernel_abi.h),
// loaded with dlopen, their kernels looked up by name and launched on a stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hidet/kernel_abi.h"
#include "hidet/runtime/export.hpp"

namespace hidet {

class KernelLibrary;

// A kernel entry point; holds its library loaded.
class HIDET_CXX_API Kernel {
 public:
  Kernel(std::shared_ptr<const KernelLibrary> library, std::string name, hidet_kernel_fn fn, std::string signature)
      : library_(std::move(library)), name_(std::move(name)), fn_(fn), signature_(std::move(signature)) {}
  // Throws hidet::Error carrying the kernel's message when it returns non-zero.
  void launch(void* const* buffers, int32_t num_buffers, const int64_t* dims, int32_t num_dims,
              void* stream) const;
  void launch(const std::vector<void*>& buffers, const std::vector<int64_t>& dims, void* stream) const {
    launch(buffers.data(), static_cast<int32_t>(buffers.size()), dims.data(), static_cast<int32_t>(dims.size()),
           stream);
  }
  const std::string& name() const { return name_; }
  hidet_kernel_fn fn() const { return fn_; }
  // What the kernel declared (kernel_abi.h: hidet_signature_<name>): JSON of its buffers and dims.
  const std::string& signature() const { return signature_; }
  const KernelLibrary& library() const { return *library_; }

 private:
  std::shared_ptr<const KernelLibrary> library_;
  std::string name_;
  hidet_kernel_fn fn_;
  std::string signature_;
};

class HIDET_CXX_API KernelLibrary : public std::enable_shared_from_this<KernelLibrary> {
 public:
  // Throws a clear error for a missing file, a non-library, or a wrong kernel ABI version.
  static std::shared_ptr<KernelLibrary> load(const std::string& path);
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary&) = delete;
  KernelLibrary& operator=(const KernelLibrary&) = delete;

  // Throws a clear error naming the kernel and the library when the library defines no such kernel (a symbol
  // of one of its dependencies, such as libc's "abort", or its ABI bookkeeping entries are not kernels) or
  // does not declare it (exports no hidet_signature_<name>).
  Kernel get_kernel(const std::string& name) const;
  bool has_kernel(const std::string& name) const;
  // Why `name` is not a kernel of this library ("exports no kernel 'abort' ...", "does not declare kernel
  // 'launch' ..."), or "" when it is one.
  std::string why_not_kernel(const std::string& name) const;
  const std::string& path() const { return path_; }
  // The library's message for its last failure on this thread.
  std::string last_error() const;

 private:
  KernelLibrary(std::string path, void* handle);
  // The address of ``name`` when this library's own object defines it as a kernel, else nullptr.
  void* own_symbol(const std::string& name) const;
  std::string path_;
  void* handle_;
  hidet_kernel_last_error_fn last_error_fn_ = nullptr;
};

}  // namespace hidet
