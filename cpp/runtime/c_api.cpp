// The C API (runtime.h): thin wrappers over the C++ runtime. Each function catches every
// exception, keeps its message for hidet_get_last_error() and returns -1 (c_api_common.hpp).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hidet/runtime.h"
#include "hidet/runtime/cuda_driver.hpp"
#include "hidet/runtime/error.hpp"
#include "hidet/runtime/kernel_library.hpp"
#include "hidet/runtime/memory_pool.hpp"
#include "hidet/runtime/stream.hpp"
#include "c_api_common.hpp"

struct HidetKernelLibrary_ {
  std::shared_ptr<hidet::KernelLibrary> library;
};

struct HidetKernel_ {
  hidet::Kernel kernel;  // holds its library loaded
};

struct HidetEvent_ {
  hidet::Event event;
};

namespace {

hidet::Device to_device(DLDevice device) {
  switch (device.device_type) {
    case kDLCPU:
      return hidet::Device::cpu();
    case kDLCUDA:
      return hidet::Device::cuda(device.device_id);
    default:
      throw hidet::Error(hidet::str_cat("unsupported device type ", device.device_type,
                                        " (expected kDLCPU = 1 or kDLCUDA = 2)"));
  }
}

// The buffer and dimension arrays of a kernel launch (hidet_kernel_launch, hidet_kernel_time).
void check_launch_arguments(const char* func, void* const* buffers, int32_t num_buffers, const int64_t* dims,
                            int32_t num_dims) {
  HIDET_CHECK(num_buffers >= 0 && num_dims >= 0, func, ": negative num_buffers (", num_buffers, ") or num_dims (",
              num_dims, ")");
  HIDET_CHECK(num_buffers == 0 || buffers != nullptr, func, ": argument 'buffers' is NULL but num_buffers is ",
              num_buffers);
  HIDET_CHECK(num_dims == 0 || dims != nullptr, func, ": argument 'dims' is NULL but num_dims is ", num_dims);
}

}  // namespace

namespace hidet {
namespace c_api {
thread_local std::string last_error;
}  // namespace c_api
}  // namespace hidet

extern "C" {

const char* hidet_get_last_error(void) { return hidet::c_api::last_error.c_str(); }

int32_t hidet_runtime_abi_version(void) { return HIDET_RUNTIME_ABI_VERSION; }

/* ---------------------------------------------------------------- devices */

int hidet_cuda_device_count(int32_t* out_count) {
  API_BEGIN();
  CHECK_NOT_NULL(out_count);
  *out_count = hidet::cuda::device_count();
  API_END();
}

const char* hidet_cuda_unavailable_reason(void) {
  try {
    return hidet::cuda::unavailable_reason().c_str();
  } catch (...) {
    return "CUDA is not available: the driver could not be queried";
  }
}

int hidet_cuda_device_synchronize(int32_t device_id) {
  API_BEGIN();
  hidet::cuda::device_synchronize(device_id);
  API_END();
}

int hidet_cuda_mem_get_info(int32_t device_id, uint64_t* out_free, uint64_t* out_total) {
  API_BEGIN();
  CHECK_NOT_NULL(out_free);
  CHECK_NOT_NULL(out_total);
  size_t free_bytes = 0, total_bytes = 0;
  hidet::cuda::mem_get_info(device_id, &free_bytes, &total_bytes);
  *out_free = free_bytes;
  *out_total = total_bytes;
  API_END();
}

/* ---------------------------------------------------------------- memory */

int hidet_alloc(DLDevice device, uint64_t nbytes, HidetStream stream, void** out_ptr) {
  API_BEGIN();
  CHECK_NOT_NULL(out_ptr);
  *out_ptr = hidet::MemoryPool::of(to_device(device)).allocate(nbytes, stream);
  API_END();
}

int hidet_free(DLDevice device, void* ptr) {
  API_BEGIN();
  CHECK_NOT_NULL(ptr);
  hidet::MemoryPool::of(to_device(device)).free(ptr);
  API_END();
}

int hidet_memory_stats(DLDevice device, HidetMemoryStats* out_stats) {
  API_BEGIN();
  CHECK_NOT_NULL(out_stats);
  hidet::MemoryStats s = hidet::MemoryPool::of(to_device(device)).stats();
  *out_stats = HidetMemoryStats{s.allocated, s.reserved, s.peak, s.cached, s.num_allocations, s.num_reused};
  API_END();
}

int hidet_empty_cache(DLDevice device) {
  API_BEGIN();
  hidet::MemoryPool::of(to_device(device)).empty_cache();
  API_END();
}

int hidet_reset_peak_memory(DLDevice device) {
  API_BEGIN();
  hidet::MemoryPool::of(to_device(device)).reset_peak();
  API_END();
}

int hidet_set_memory_limit(DLDevice device, uint64_t limit) {
  API_BEGIN();
  hidet::MemoryPool::of(to_device(device)).set_limit(limit);
  API_END();
}

int hidet_memcpy(void* dst, const void* src, uint64_t nbytes, HidetStream stream) {
  API_BEGIN();
  if (nbytes == 0) return 0;
  CHECK_NOT_NULL(dst);
  CHECK_NOT_NULL(src);
  // With unified addressing the pointers say where they live; memory CUDA does not know is host memory.
  bool involves_cuda = hidet::cuda::pointer_device(dst) >= 0 || hidet::cuda::pointer_device(src) >= 0;
  if (involves_cuda) {
    hidet::cuda::memcpy_async(dst, src, nbytes, stream);
  } else {
    std::memcpy(dst, src, nbytes);
  }
  API_END();
}

/* ---------------------------------------------------------------- streams and events */

int hidet_stream_create(int32_t device_id, HidetStream* out_stream) {
  API_BEGIN();
  CHECK_NOT_NULL(out_stream);
  *out_stream = hidet::cuda::stream_create(device_id);
  API_END();
}

int hidet_stream_destroy(HidetStream stream) {
  API_BEGIN();
  HIDET_CHECK(stream != nullptr, __func__, ": argument 'stream' is NULL (the default stream cannot be destroyed)");
  hidet::cuda::stream_destroy(stream);
  API_END();
}

int hidet_stream_synchronize(HidetStream stream) {
  API_BEGIN();
  hidet::cuda::stream_synchronize(stream);
  API_END();
}

int hidet_event_create(int32_t device_id, int32_t enable_timing, HidetEventHandle* out_event) {
  API_BEGIN();
  CHECK_NOT_NULL(out_event);
  *out_event = new HidetEvent_{hidet::Event(device_id, enable_timing != 0)};
  API_END();
}

int hidet_event_destroy(HidetEventHandle event) {
  API_BEGIN();
  CHECK_NOT_NULL(event);
  delete event;
  API_END();
}

int hidet_event_record(HidetEventHandle event, HidetStream stream) {
  API_BEGIN();
  CHECK_NOT_NULL(event);
  hidet::cuda::event_record(event->event.handle(), stream);
  API_END();
}

int hidet_event_synchronize(HidetEventHandle event) {
  API_BEGIN();
  CHECK_NOT_NULL(event);
  event->event.synchronize();
  API_END();
}

int hidet_event_elapsed_ms(HidetEventHandle start, HidetEventHandle end, float* out_ms) {
  API_BEGIN();
  CHECK_NOT_NULL(start);
  CHECK_NOT_NULL(end);
  CHECK_NOT_NULL(out_ms);
  *out_ms = start->event.elapsed_ms(end->event);
  API_END();
}

/* ---------------------------------------------------------------- kernel libraries */

int hidet_library_load(const char* path, HidetKernelLibraryHandle* out_library) {
  API_BEGIN();
  CHECK_NOT_NULL(path);
  CHECK_NOT_NULL(out_library);
  *out_library = new HidetKernelLibrary_{hidet::KernelLibrary::load(path)};
  API_END();
}

int hidet_library_free(HidetKernelLibraryHandle library) {
  API_BEGIN();
  CHECK_NOT_NULL(library);
  delete library;
  API_END();
}

int hidet_library_get_kernel(HidetKernelLibraryHandle library, const char* name, HidetKernelHandle* out_kernel) {
  API_BEGIN();
  CHECK_NOT_NULL(library);
  CHECK_NOT_NULL(name);
  CHECK_NOT_NULL(out_kernel);
  *out_kernel = new HidetKernel_{library->library->get_kernel(name)};
  API_END();
}

int hidet_library_has_kernel(HidetKernelLibraryHandle library, const char* name, int32_t* out_has) {
  API_BEGIN();
  CHECK_NOT_NULL(library);
  CHECK_NOT_NULL(name);
  CHECK_NOT_NULL(out_has);
  *out_has = library->library->has_kernel(name) ? 1 : 0;
  API_END();
}

int hidet_kernel_signature(HidetKernelHandle kernel, const char** out_signature) {
  API_BEGIN();
  CHECK_NOT_NULL(kernel);
  CHECK_NOT_NULL(out_signature);
  *out_signature = kernel->kernel.signature().c_str();
  API_END();
}

int hidet_kernel_free(HidetKernelHandle kernel) {
  API_BEGIN();
  CHECK_NOT_NULL(kernel);
  delete kernel;
  API_END();
}

int hidet_kernel_launch(HidetKernelHandle kernel, void* const* buffers, int32_t num_buffers, const int64_t* dims,
                        int32_t num_dims, HidetStream stream) {
  API_BEGIN();
  CHECK_NOT_NULL(kernel);
  check_launch_arguments(__func__, buffers, num_buffers, dims, num_dims);
  kernel->kernel.launch(buffers, num_buffers, dims, num_dims, stream);
  API_END();
}

int hidet_kernel_time(HidetKernelHandle kernel, void* const* buffers, int32_t num_buffers, const int64_t* dims,
                      int32_t num_dims, int32_t device, int32_t calls, int32_t repeat, float* out_ms) {
  API_BEGIN();
  CHECK_NOT_NULL(kernel);
  CHECK_NOT_NULL(out_ms);
  check_launch_arguments(__func__, buffers, num_buffers, dims, num_dims);
  HIDET_CHECK(calls >= 1 && repeat >= 1, __func__, ": calls (", calls, ") and repeat (", repeat,
              ") must be at least 1");
  HIDET_CHECK(hidet::cuda::available(), __func__, ": CUDA is not available: ", hidet::cuda::unavailable_reason());
  hidet::cuda::set_device(device);
  // everything created here is released on every path (a failed launch inside the capture included)
  struct Resources {
    void* stream = nullptr;
    void* graph = nullptr;
    void* exec = nullptr;
    void* start = nullptr;
    void* end = nullptr;
    bool capturing = false;
    ~Resources() {
      try {
        if (capturing) {
          void* broken = hidet::cuda::stream_end_capture(stream);
          if (broken) hidet::cuda::graph_destroy(broken);
        }
        if (exec) hidet::cuda::graph_exec_destroy(exec);
        if (graph) hidet::cuda::graph_destroy(graph);
        if (start) hidet::cuda::event_destroy(start);
        if (end) hidet::cuda::event_destroy(end);
        if (stream) hidet::cuda::stream_destroy(stream);
      } catch (...) {
      }
    }
  } r;
  r.stream = hidet::cuda::stream_create(device);
  kernel->kernel.launch(buffers, num_buffers, dims, num_dims, r.stream);  // outside the capture: lazy loading
  hidet::cuda::stream_synchronize(r.stream);
  hidet::cuda::stream_begin_capture(r.stream);
  r.capturing = true;
  for (int32_t i = 0; i < calls; ++i) kernel->kernel.launch(buffers, num_buffers, dims, num_dims, r.stream);
  r.capturing = false;
  r.graph = hidet::cuda::stream_end_capture(r.stream);
  r.exec = hidet::cuda::graph_instantiate(r.graph);
  r.start = hidet::cuda::event_create(device, true);
  r.end = hidet::cuda::event_create(device, true);
  hidet::cuda::graph_launch(r.exec, r.stream);  // warm
  std::vector<float> times;
  for (int32_t i = 0; i < repeat; ++i) {
    hidet::cuda::event_record(r.start, r.stream);
    hidet::cuda::graph_launch(r.exec, r.stream);
    hidet::cuda::event_record(r.end, r.stream);
    hidet::cuda::event_synchronize(r.end);
    times.push_back(hidet::cuda::event_elapsed_ms(r.start, r.end) / static_cast<float>(calls));
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  *out_ms = times[times.size() / 2];
  API_END();
}

}  // extern "C"
