// Shared pieces of the binding files in this directory. The bindings reach the runtime only through
// its C API (hidet/runtime.h): no C++ exception or object crosses from libhidet_runtime.so into this
// module, so the two may even carry different C++ runtimes.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "hidet/runtime.h"

namespace hidet {
namespace python {

// Memory held by Python tensors: a block from a runtime pool, or memory borrowed through DLPack.
struct Storage {
  DLDevice device;
  void* ptr;
  uint64_t nbytes;
  std::function<void()> release;  // called once, when the last reference goes

  Storage(DLDevice device, void* ptr, uint64_t nbytes, std::function<void()> release)
      : device(device), ptr(ptr), nbytes(nbytes), release(std::move(release)) {}
  ~Storage() {
    if (release) release();
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

// Raise the Python exception for a failed C API call (HidetRuntimeError, or OutOfMemoryError for
// HIDET_ERROR_OUT_OF_MEMORY) carrying hidet_get_last_error(); do nothing for 0.
void check(int status);

// DLPack's device from Python's (kind, index) pair, kind being DLPack's code (1 cpu, 2 cuda).
DLDevice make_device(int kind, int index);

void bind_dlpack(pybind11::module_& m);
void bind_graph(pybind11::module_& m);  // graph.cpp: _C.Graph, _C.CudaGraph

}  // namespace python
}  // namespace hidet
