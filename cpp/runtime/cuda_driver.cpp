// The CUDA driver API, loaded with dlopen on first use. cuda.h is deliberately not included, so the
// runtime builds without the CUDA toolkit: the few types and constants needed are declared below,
// with the signatures of the driver's exported symbols (the _v2 names are the current ABI).
#include <dlfcn.h>

#include <initializer_list>
#include <mutex>
#include <string>
#include <vector>

#include "hidet/runtime/cuda_driver.hpp"
#include "hidet/runtime/error.hpp"

namespace hidet {
namespace cuda {
namespace {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
constexpr int CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
// Relaxed capture: other threads' (and our own pool's) non-captured CUDA calls stay legal.
constexpr int CU_STREAM_CAPTURE_MODE_RELAXED = 2;

const char* const kAdvice = " Use device='cpu', or run on a machine with an NVIDIA GPU.";

// The loaded driver: entry points, the device count, and the primary context of each device.
struct Driver {
  int count = 0;       // 0 when unavailable
  std::string reason;  // why unavailable ("" when available)

  CUresult (*cuInit)(unsigned flags) = nullptr;
  CUresult (*cuDeviceGetCount)(int* count) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext ctx) = nullptr;
  CUresult (*cuCtxGetCurrent)(CUcontext* ctx) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr* ptr, size_t nbytes) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr ptr) = nullptr;
  CUresult (*cuMemGetInfo)(size_t* free_bytes, size_t* total_bytes) = nullptr;
  CUresult (*cuMemcpyAsync)(CUdeviceptr dst, CUdeviceptr src, size_t nbytes, CUstream stream) = nullptr;
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t n, CUstream stream) = nullptr;
  CUresult (*cuPointerGetAttribute)(void* data, int attribute, CUdeviceptr ptr) = nullptr;
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned flags) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream stream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream stream) = nullptr;
  CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned flags) = nullptr;
  CUresult (*cuStreamBeginCapture)(CUstream stream, int mode) = nullptr;
  CUresult (*cuStreamEndCapture)(CUstream stream, CUgraph* graph) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec* exec, CUgraph graph, unsigned long long flags) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph graph) = nullptr;
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags) = nullptr;
  CUresult (*cuEventDestroy)(CUevent event) = nullptr;
  CUresult (*cuEventRecord)(CUevent event, CUstream stream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent event) = nullptr;
  CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent end) = nullptr;
  CUresult (*cuGetErrorName)(CUresult error, const char** str) = nullptr;
  CUresult (*cuGetErrorString)(CUresult error, const char** str) = nullptr;

  std::mutex context_mutex;
  std::vector<CUcontext> contexts;  // primary contexts, retained on first use, never released
};

// Resolve `fn` from the first of `names` the library exports; false when none is.
template <typename Fn>
bool resolve(void* lib, Fn& fn, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* sym = dlsym(lib, name)) {
      fn = reinterpret_cast<Fn>(sym);
      return true;
    }
  }
  return false;
}

std::string describe(const Driver& d, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.cuGetErrorName == nullptr || d.cuGetErrorName(r, &name) != CUDA_SUCCESS || name == nullptr) {
    return str_cat("CUDA error code ", r);
  }
  if (d.cuGetErrorString == nullptr || d.cuGetErrorString(r, &text) != CUDA_SUCCESS || text == nullptr) {
    return name;
  }
  return str_cat(name, " (", text, ")");
}

// Fill `d` or set d.reason; runs once.
void load(Driver& d) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    std::string first_error = err ? err : "unknown error";
    lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      d.reason = str_cat("CUDA is not available: libcuda.so.1 could not be loaded (", first_error,
                         "); this machine has no NVIDIA driver.", kAdvice);
      return;
    }
  }
  // The library stays loaded for the life of the process.
#define HIDET_RESOLVE(field, ...)                                                                        \
  if (!resolve(lib, d.field, {__VA_ARGS__})) {                                                           \
    d.reason = str_cat("CUDA is not available: the NVIDIA driver lacks " #field "; it is too old.", kAdvice); \
    return;                                                                                              \
  }
  HIDET_RESOLVE(cuGetErrorName, "cuGetErrorName")
  HIDET_RESOLVE(cuGetErrorString, "cuGetErrorString")
  HIDET_RESOLVE(cuInit, "cuInit")
  HIDET_RESOLVE(cuDeviceGetCount, "cuDeviceGetCount")
  HIDET_RESOLVE(cuDeviceGet, "cuDeviceGet")
  HIDET_RESOLVE(cuDeviceGetAttribute, "cuDeviceGetAttribute")
  HIDET_RESOLVE(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
  HIDET_RESOLVE(cuCtxSetCurrent, "cuCtxSetCurrent")
  HIDET_RESOLVE(cuCtxGetCurrent, "cuCtxGetCurrent")
  HIDET_RESOLVE(cuCtxSynchronize, "cuCtxSynchronize")
  HIDET_RESOLVE(cuMemAlloc, "cuMemAlloc_v2")
  HIDET_RESOLVE(cuMemFree, "cuMemFree_v2")
  HIDET_RESOLVE(cuMemGetInfo, "cuMemGetInfo_v2")
  HIDET_RESOLVE(cuMemcpyAsync, "cuMemcpyAsync")
  HIDET_RESOLVE(cuMemsetD8Async, "cuMemsetD8Async")
  HIDET_RESOLVE(cuPointerGetAttribute, "cuPointerGetAttribute")
  HIDET_RESOLVE(cuStreamCreate, "cuStreamCreate")
  HIDET_RESOLVE(cuStreamDestroy, "cuStreamDestroy_v2")
  HIDET_RESOLVE(cuStreamSynchronize, "cuStreamSynchronize")
  HIDET_RESOLVE(cuStreamWaitEvent, "cuStreamWaitEvent")
  HIDET_RESOLVE(cuStreamBeginCapture, "cuStreamBeginCapture_v2")
  HIDET_RESOLVE(cuStreamEndCapture, "cuStreamEndCapture")
  HIDET_RESOLVE(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags")
  HIDET_RESOLVE(cuGraphLaunch, "cuGraphLaunch")
  HIDET_RESOLVE(cuGraphExecDestroy, "cuGraphExecDestroy")
  HIDET_RESOLVE(cuGraphDestroy, "cuGraphDestroy")
  HIDET_RESOLVE(cuEventCreate, "cuEventCreate")
  HIDET_RESOLVE(cuEventDestroy, "cuEventDestroy_v2")
  HIDET_RESOLVE(cuEventRecord, "cuEventRecord")
  HIDET_RESOLVE(cuEventSynchronize, "cuEventSynchronize")
  HIDET_RESOLVE(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime")
#undef HIDET_RESOLVE

  if (CUresult r = d.cuInit(0); r != CUDA_SUCCESS) {
    d.reason = str_cat("CUDA is not available: cuInit failed with ", describe(d, r), ".", kAdvice);
    return;
  }
  int count = 0;
  if (CUresult r = d.cuDeviceGetCount(&count); r != CUDA_SUCCESS || count <= 0) {
    d.reason = r != CUDA_SUCCESS
                   ? str_cat("CUDA is not available: cuDeviceGetCount failed with ", describe(d, r), ".", kAdvice)
                   : str_cat("CUDA is not available: the NVIDIA driver found no GPU.", kAdvice);
    return;
  }
  d.contexts.assign(count, nullptr);
  d.count = count;
}

// The driver table, loaded on first use. Never destroyed: streams and memory may be released
// during process exit, after static destructors have run.
Driver& driver() {
  static Driver* d = new Driver();
  static std::once_flag once;
  std::call_once(once, [] { load(*d); });
  return *d;
}

// The driver, or a clear error when CUDA is unavailable.
Driver& require() {
  Driver& d = driver();
  if (d.count == 0) throw Error(d.reason);
  return d;
}

void check(const Driver& d, CUresult r, const char* call) {
  if (r != CUDA_SUCCESS) throw Error(str_cat("CUDA error ", describe(d, r), " in ", call));
}
#define HIDET_CU(d, call, ...) check(d, d.call(__VA_ARGS__), #call)

// Make `device`'s primary context current on this thread.
Driver& use_device(int device) {
  Driver& d = require();
  HIDET_CHECK(device >= 0 && device < d.count, "cuda:", device, " does not exist: this machine has ", d.count,
              " CUDA device(s)");
  CUcontext ctx;
  {
    std::lock_guard<std::mutex> lock(d.context_mutex);
    if (d.contexts[device] == nullptr) {
      CUdevice dev;
      HIDET_CU(d, cuDeviceGet, &dev, device);
      HIDET_CU(d, cuDevicePrimaryCtxRetain, &d.contexts[device], dev);
    }
    ctx = d.contexts[device];
  }
  HIDET_CU(d, cuCtxSetCurrent, ctx);
  return d;
}

// For calls on handles that carry their own context (streams, events): any current context will
// do, so keep the caller's, or use device 0's when the thread has none.
Driver& use_any_context() {
  Driver& d = require();
  CUcontext ctx = nullptr;
  HIDET_CU(d, cuCtxGetCurrent, &ctx);
  return ctx != nullptr ? d : use_device(0);
}

CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// Work on `dst` (or else `src`) happens in the context of the device that owns it.
Driver& use_device_of(const void* dst, const void* src) {
  int device = pointer_device(dst);
  if (device < 0 && src != nullptr) device = pointer_device(src);
  return device >= 0 ? use_device(device) : use_any_context();
}

}  // namespace

bool available() { return driver().count > 0; }

const std::string& unavailable_reason() { return driver().reason; }

int device_count() { return driver().count; }

void set_device(int device) { use_device(device); }

void* malloc(int device, size_t nbytes) {
  Driver& d = use_device(device);
  CUdeviceptr ptr = 0;
  CUresult r = d.cuMemAlloc(&ptr, nbytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
  check(d, r, "cuMemAlloc");
  return reinterpret_cast<void*>(ptr);
}

void free(int device, void* ptr) {
  if (ptr == nullptr) return;
  Driver& d = use_device(device);
  HIDET_CU(d, cuMemFree, dptr(ptr));
}

void mem_get_info(int device, size_t* free_bytes, size_t* total_bytes) {
  Driver& d = use_device(device);
  HIDET_CU(d, cuMemGetInfo, free_bytes, total_bytes);
}

int pointer_device(const void* ptr) {
  if (!available() || ptr == nullptr) return -1;
  Driver& d = use_any_context();
  int ordinal = -1;
  // Fails (CUDA_ERROR_INVALID_VALUE) for host memory CUDA does not know about.
  if (d.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, dptr(ptr)) != CUDA_SUCCESS) return -1;
  return ordinal;
}

void memcpy_async(void* dst, const void* src, size_t nbytes, void* stream) {
  if (nbytes == 0) return;
  Driver& d = use_device_of(dst, src);
  HIDET_CU(d, cuMemcpyAsync, dptr(dst), dptr(src), nbytes, static_cast<CUstream>(stream));
}

void memset_d8_async(void* dst, uint8_t value, size_t nbytes, void* stream) {
  if (nbytes == 0) return;
  Driver& d = use_device_of(dst, nullptr);
  HIDET_CU(d, cuMemsetD8Async, dptr(dst), value, nbytes, static_cast<CUstream>(stream));
}

void* stream_create(int device) {
  Driver& d = use_device(device);
  CUstream stream = nullptr;
  HIDET_CU(d, cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
  return stream;
}

void stream_destroy(void* stream) {
  Driver& d = use_any_context();
  HIDET_CU(d, cuStreamDestroy, static_cast<CUstream>(stream));
}

void stream_synchronize(void* stream) {
  Driver& d = use_any_context();
  HIDET_CU(d, cuStreamSynchronize, static_cast<CUstream>(stream));
}

void device_synchronize(int device) {
  Driver& d = use_device(device);
  HIDET_CU(d, cuCtxSynchronize);
}

void* event_create(int device, bool enable_timing) {
  Driver& d = use_device(device);
  CUevent event = nullptr;
  HIDET_CU(d, cuEventCreate, &event, enable_timing ? 0u : CU_EVENT_DISABLE_TIMING);
  return event;
}

void event_destroy(void* event) {
  Driver& d = use_any_context();
  HIDET_CU(d, cuEventDestroy, static_cast<CUevent>(event));
}

void event_record(void* event, void* stream) {
  Driver& d = use_any_context();
  HIDET_CU(d, cuEventRecord, static_cast<CUevent>(event), static_cast<CUstream>(stream));
}

void event_synchronize(void* event) {
  Driver& d = use_any_context();
  HIDET_CU(d, cuEventSynchronize, static_cast<CUevent>(event));
}

float event_elapsed_ms(void* start, void* end) {
  Driver& d = use_any_context();
  float ms = 0.0f;
  HIDET_CU(d, cuEventElapsedTime, &ms, static_cast<CUevent>(start), static_cast<CUevent>(end));
  return ms;
}

void compute_capability(int device, int* major, int* minor) {
  Driver& d = use_device(device);
  CUdevice dev;
  HIDET_CU(d, cuDeviceGet, &dev, device);
  HIDET_CU(d, cuDeviceGetAttribute, major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  HIDET_CU(d, cuDeviceGetAttribute, minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
}

void stream_wait_event(void* stream, void* event) {
  Driver& d = use_any_context();
  HIDET_CU(d, cuStreamWaitEvent, static_cast<CUstream>(stream), static_cast<CUevent>(event), 0u);
}

void stream_begin_capture(void* stream) {
  Driver& d = use_any_context();
  HIDET_CU(d, cuStreamBeginCapture, static_cast<CUstream>(stream), CU_STREAM_CAPTURE_MODE_RELAXED);
}

void* stream_end_capture(void* stream) {
  Driver& d = use_any_context();
  CUgraph graph = nullptr;
  HIDET_CU(d, cuStreamEndCapture, static_cast<CUstream>(stream), &graph);
  return graph;
}

void* graph_instantiate(void* graph) {
  Driver& d = use_any_context();
  CUgraphExec exec = nullptr;
  HIDET_CU(d, cuGraphInstantiateWithFlags, &exec, static_cast<CUgraph>(graph), 0ull);
  return exec;
}

void graph_launch(void* exec, void* stream) {
  Driver& d = use_any_context();
  HIDET_CU(d, cuGraphLaunch, static_cast<CUgraphExec>(exec), static_cast<CUstream>(stream));
}

void graph_exec_destroy(void* exec) {
  Driver& d = use_any_context();
  HIDET_CU(d, cuGraphExecDestroy, static_cast<CUgraphExec>(exec));
}

void graph_destroy(void* graph) {
  Driver& d = use_any_context();
  HIDET_CU(d, cuGraphDestroy, static_cast<CUgraph>(graph));
}

}  // namespace cuda
}  // namespace hidet
