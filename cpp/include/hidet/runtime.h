/*
 * hidet runtime C API.
 *
 * Conventions (in the manner of TVM's c_runtime_api.h):
 *  - Every function returns 0 on success and a negative code on failure: HIDET_ERROR (-1), or
 *    HIDET_ERROR_OUT_OF_MEMORY (-2) when memory could not be allocated. On failure,
 *    hidet_get_last_error() returns a message for the calling thread. No C++ exception or C++
 *    object crosses this boundary, so callers built with another C++ runtime (even one linked
 *    statically) are safe; the Python module uses exactly these functions.
 *  - Handles are opaque; the caller owns a handle it received until it passes it to the matching
 *    *_free / *_destroy function. Pointers passed *in* stay owned by the caller; the runtime keeps
 *    no reference to them after the call returns unless a comment says otherwise.
 *  - Devices use DLPack's codes: kDLCPU (1) and kDLCUDA (2).
 *  - CUDA is loaded at run time (libcuda.so.1): the same library works on a machine without a GPU
 *    or CUDA toolkit, where any CUDA request fails with a clear error.
 *
 * Thread safety: all functions may be called from several threads at once.
 */
#ifndef HIDET_RUNTIME_H
#define HIDET_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "hidet/dlpack.h"
#include "hidet/kernel_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HIDET_RUNTIME_ABI_VERSION 1

#define HIDET_ERROR (-1)
#define HIDET_ERROR_OUT_OF_MEMORY (-2)

/* Declarations below sit inside extern "C"; the macro only exports them from the library. */
#define HIDET_API __attribute__((visibility("default")))

/*! \brief Opaque handle of a loaded kernel library. */
typedef struct HidetKernelLibrary_* HidetKernelLibraryHandle;
/*! \brief Opaque handle of a kernel inside a library (it keeps its library loaded). */
typedef struct HidetKernel_* HidetKernelHandle;
/*! \brief A CUDA stream (CUstream / cudaStream_t); NULL is the legacy default stream. */
typedef void* HidetStream;
/*! \brief Opaque handle of a CUDA event. */
typedef struct HidetEvent_* HidetEventHandle;

/*! \brief Memory-pool statistics of one device, in bytes. */
typedef struct {
  uint64_t allocated; /* bytes in blocks currently handed out (rounded sizes) */
  uint64_t reserved;  /* bytes obtained from the device: allocated + cached */
  uint64_t peak;      /* high-water mark of `allocated` since start or the last reset */
  uint64_t cached;    /* bytes in freed blocks kept for reuse */
  uint64_t num_allocations; /* allocations served since start */
  uint64_t num_reused;      /* of which were served from cached blocks */
} HidetMemoryStats;

/* ---------------------------------------------------------------- errors and version */

/*!
 * \brief The message of the last failed call on this thread.
 * \return A pointer owned by the runtime, valid until the next failing call on this thread.
 */
HIDET_API const char* hidet_get_last_error(void);

/*! \brief Version of this C API; a caller compiled against another version should refuse it. */
HIDET_API int32_t hidet_runtime_abi_version(void);

/*!
 * \brief The FNV-1a 64-bit hash of `nbytes` bytes at `data` (host memory), as artifacts use to
 * detect corruption (docs/artifact.md). Cannot fail; NULL with nbytes 0 is allowed.
 */
HIDET_API uint64_t hidet_fnv1a64(const void* data, uint64_t nbytes);

/* ---------------------------------------------------------------- devices */

/*!
 * \brief Number of CUDA devices. 0 (and success) when no driver or no GPU is present.
 * \param out_count Written with the count.
 */
HIDET_API int hidet_cuda_device_count(int32_t* out_count);

/*!
 * \brief Why CUDA cannot be used here ("" when it can).
 * \return A pointer owned by the runtime, valid for the life of the process.
 */
HIDET_API const char* hidet_cuda_unavailable_reason(void);

/*! \brief Block until all work on a CUDA device has finished. */
HIDET_API int hidet_cuda_device_synchronize(int32_t device_id);

/*! \brief Free and total bytes of a CUDA device's memory. */
HIDET_API int hidet_cuda_mem_get_info(int32_t device_id, uint64_t* out_free, uint64_t* out_total);

/* ---------------------------------------------------------------- memory */

/*!
 * \brief Allocate `nbytes` from the caching pool of `device`.
 * \param stream The stream the memory will be used on (CUDA; NULL for the default stream). A
 *        freed block is reused only by allocations on the same stream.
 * \param out_ptr Written with the pointer; the caller owns it and returns it with hidet_free.
 * On failure (out of memory) the error names the request and the pool's state.
 */
HIDET_API int hidet_alloc(DLDevice device, uint64_t nbytes, HidetStream stream, void** out_ptr);

/*! \brief Return memory obtained from hidet_alloc on the same device to its pool. */
HIDET_API int hidet_free(DLDevice device, void* ptr);

/*! \brief Statistics of the pool of `device`. */
HIDET_API int hidet_memory_stats(DLDevice device, HidetMemoryStats* out_stats);

/*! \brief Release every cached (free) block of the pool of `device` back to the device. */
HIDET_API int hidet_empty_cache(DLDevice device);

/*! \brief Restart the pool's peak statistic at its current allocation. */
HIDET_API int hidet_reset_peak_memory(DLDevice device);

/*!
 * \brief Cap the bytes the pool of `device` may reserve (0: no cap besides the device's own);
 * requests beyond it fail with HIDET_ERROR_OUT_OF_MEMORY.
 */
HIDET_API int hidet_set_memory_limit(DLDevice device, uint64_t limit);

/*!
 * \brief Copy `nbytes` between any two buffers (host or CUDA, unified addressing).
 * Copies that touch CUDA memory are enqueued on `stream`; host-to-host copies run at once.
 */
HIDET_API int hidet_memcpy(void* dst, const void* src, uint64_t nbytes, HidetStream stream);

/* ---------------------------------------------------------------- streams and events */

/*! \brief Create a non-blocking stream on a CUDA device; the caller destroys it. */
HIDET_API int hidet_stream_create(int32_t device_id, HidetStream* out_stream);

/*! \brief Destroy a stream made by hidet_stream_create. */
HIDET_API int hidet_stream_destroy(HidetStream stream);

/*! \brief Block until all work enqueued on `stream` has finished. */
HIDET_API int hidet_stream_synchronize(HidetStream stream);

/*! \brief Create an event on a CUDA device (with timing enabled when `enable_timing` != 0). */
HIDET_API int hidet_event_create(int32_t device_id, int32_t enable_timing, HidetEventHandle* out_event);

/*! \brief Destroy an event made by hidet_event_create. */
HIDET_API int hidet_event_destroy(HidetEventHandle event);

/*! \brief Record `event` on `stream`. */
HIDET_API int hidet_event_record(HidetEventHandle event, HidetStream stream);

/*! \brief Block until `event` has completed. */
HIDET_API int hidet_event_synchronize(HidetEventHandle event);

/*! \brief Milliseconds between two recorded, completed events. */
HIDET_API int hidet_event_elapsed_ms(HidetEventHandle start, HidetEventHandle end, float* out_ms);

/* ---------------------------------------------------------------- kernel libraries */

/*!
 * \brief Load a kernel library (a shared object following kernel_abi.h).
 * \param path File path; copied, not kept.
 * \param out_library Written with a handle the caller frees with hidet_library_free.
 * A missing file, a file that is not a shared object, or a library built for another kernel ABI
 * version is an error that names the path and the reason.
 */
HIDET_API int hidet_library_load(const char* path, HidetKernelLibraryHandle* out_library);

/*! \brief Release a library handle; kernels taken from it keep it loaded until they are freed. */
HIDET_API int hidet_library_free(HidetKernelLibraryHandle library);

/*!
 * \brief Look up the kernel exported under `name`.
 * \param out_kernel Written with a handle the caller frees with hidet_kernel_free.
 * A missing symbol is an error naming the kernel and the library path.
 */
HIDET_API int hidet_library_get_kernel(HidetKernelLibraryHandle library, const char* name,
                                       HidetKernelHandle* out_kernel);

/*! \brief Whether the library exports a kernel called `name` (written to `out_has` as 1 or 0). */
HIDET_API int hidet_library_has_kernel(HidetKernelLibraryHandle library, const char* name, int32_t* out_has);

/*! \brief Release a kernel handle. */
HIDET_API int hidet_kernel_free(HidetKernelHandle kernel);

/*!
 * \brief Launch a kernel through the uniform ABI (see kernel_abi.h for the arguments).
 * A non-zero return of the kernel is an error carrying the kernel's own message.
 */
HIDET_API int hidet_kernel_launch(HidetKernelHandle kernel, void* const* buffers, int32_t num_buffers,
                                  const int64_t* dims, int32_t num_dims, HidetStream stream);

#ifdef __cplusplus
}
#endif

#endif /* HIDET_RUNTIME_H */
