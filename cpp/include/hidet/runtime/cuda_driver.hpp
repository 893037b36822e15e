// The CUDA driver API, loaded at run time from libcuda.so.1 so that one build of the runtime works
// on machines with and without a GPU. Every call uses the device's primary context (the one the
// CUDA runtime and PyTorch use), made current on the calling thread first.
//
// Functions throw hidet::Error with the driver's error name and text on failure; on a machine
// without a usable driver, each throws an error saying why CUDA is unavailable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "hidet/runtime/export.hpp"

namespace hidet {
namespace cuda {

// Whether the driver loaded and at least one device is present (never throws).
HIDET_CXX_API bool available();
// Why CUDA is unavailable ("" when available): the message that CUDA calls then throw, starting
// with "CUDA is not available: ".
HIDET_CXX_API const std::string& unavailable_reason();
// Number of devices; 0 when unavailable (never throws).
HIDET_CXX_API int device_count();
// Throws a clear error unless `device` names an existing GPU; makes its primary context current.
HIDET_CXX_API void set_device(int device);

// Device memory. `malloc` returns nullptr when the device is out of memory (other failures throw).
HIDET_CXX_API void* malloc(int device, size_t nbytes);
HIDET_CXX_API void free(int device, void* ptr);
HIDET_CXX_API void mem_get_info(int device, size_t* free_bytes, size_t* total_bytes);
// Which device a pointer belongs to: -1 for host memory unknown to CUDA.
HIDET_CXX_API int pointer_device(const void* ptr);

// Copies with unified addressing (host <-> device, device <-> device), enqueued on `stream` in the
// context of the device that owns `dst` (or else `src`). Asynchronous: a copy into host memory may
// not have landed until the stream is synchronized.
HIDET_CXX_API void memcpy_async(void* dst, const void* src, size_t nbytes, void* stream);
HIDET_CXX_API void memset_d8_async(void* dst, uint8_t value, size_t nbytes, void* stream);

// Streams (CUstream) and events (CUevent) as opaque pointers.
HIDET_CXX_API void* stream_create(int device);
HIDET_CXX_API void stream_destroy(void* stream);
HIDET_CXX_API void stream_synchronize(void* stream);
HIDET_CXX_API void device_synchronize(int device);
HIDET_CXX_API void* event_create(int device, bool enable_timing);
HIDET_CXX_API void event_destroy(void* event);
HIDET_CXX_API void event_record(void* event, void* stream);
HIDET_CXX_API void event_synchronize(void* event);
HIDET_CXX_API float event_elapsed_ms(void* start, void* end);
// Make `stream` wait (on the device) until `event`'s recorded work has completed.
HIDET_CXX_API void stream_wait_event(void* stream, void* event);

// The compute capability (e.g. 9.0 for H100) of a device.
HIDET_CXX_API void compute_capability(int device, int* major, int* minor);

// CUDA graphs (CUgraph / CUgraphExec as opaque pointers). Capture uses the relaxed mode, so calls
// of other threads (or our own pool) that are not stream work do not invalidate it. Capture on a
// stream that the caller made current with set_device.
HIDET_CXX_API void stream_begin_capture(void* stream);
HIDET_CXX_API void* stream_end_capture(void* stream);  // returns the captured CUgraph
HIDET_CXX_API void* graph_instantiate(void* graph);    // returns a CUgraphExec
HIDET_CXX_API void graph_launch(void* exec, void* stream);
HIDET_CXX_API void graph_exec_destroy(void* exec);
HIDET_CXX_API void graph_destroy(void* graph);

}  // namespace cuda
}  // namespace hidet
