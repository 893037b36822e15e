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
 * \brief Look up the kernel exported and declared under `name` (kernel_abi.h: hidet_signature_<name>).
 * \param out_kernel Written with a handle the caller frees with hidet_kernel_free.
 * A missing or undeclared kernel is an error naming the kernel and the library path.
 */
HIDET_API int hidet_library_get_kernel(HidetKernelLibraryHandle library, const char* name,
                                       HidetKernelHandle* out_kernel);

/*! \brief Whether the library exports and declares a kernel called `name` (written to `out_has` as 1 or 0). */
HIDET_API int hidet_library_has_kernel(HidetKernelLibraryHandle library, const char* name, int32_t* out_has);

/*! \brief Release a kernel handle. */
HIDET_API int hidet_kernel_free(HidetKernelHandle kernel);

/*!
 * \brief The kernel's declaration (kernel_abi.h): JSON text of its buffers (dtype, shape) and dims, written to
 * `out_signature`; valid while the kernel handle lives.
 */
HIDET_API int hidet_kernel_signature(HidetKernelHandle kernel, const char** out_signature);

/*!
 * \brief Launch a kernel through the uniform ABI (see kernel_abi.h for the arguments).
 * A non-zero return of the kernel is an error carrying the kernel's own message.
 */
HIDET_API int hidet_kernel_launch(HidetKernelHandle kernel, void* const* buffers, int32_t num_buffers,
                                  const int64_t* dims, int32_t num_dims, HidetStream stream);

/*!
 * \brief Time a CUDA kernel on the GPU alone: `calls` launches (arguments as hidet_kernel_launch) are
 * captured into one CUDA graph on a stream of its own on `device`, the graph is replayed `repeat` times,
 * and the median time per launch in milliseconds is written to `out_ms`. Host launch costs, which exceed a
 * small kernel's own time, are not counted (a tuner comparing candidates needs exactly that).
 * The buffers are written by every launch.
 */
HIDET_API int hidet_kernel_time(HidetKernelHandle kernel, void* const* buffers, int32_t num_buffers,
                                const int64_t* dims, int32_t num_dims, int32_t device, int32_t calls,
                                int32_t repeat, float* out_ms);

/* ---------------------------------------------------------------- compiled graphs */

/*
 * A compiled graph is an artifact (docs/artifact.md) loaded onto a device: its kernel libraries
 * loaded, its weights copied to the device once. Running it enqueues its instructions on the
 * caller's stream.
 *
 * Thread safety: a graph may be run from several threads at once. Intermediates live in an arena;
 * on CUDA the graph keeps one arena per stream (created on the first run on that stream, freed
 * with the graph), so runs on one stream share an arena (they are ordered by the stream) and runs
 * on different streams never do. On the CPU runs are synchronous and each concurrent run uses an
 * arena of its own. A CUDA graph (hidet_graph_cuda_graph_create) may likewise be run from several
 * threads and streams; its replays are serialized on the device.
 */

/*!
 * \brief The DLDataType of one of hidet's dtype names (as HidetTensorInfo.dtype gives them):
 * "float32" -> {kDLFloat, 32, 1}, "bfloat16" -> {kDLBfloat, 16, 1}, "bool" -> {kDLBool, 8, 1}, ...
 * An unknown name is an error.
 */
HIDET_API int hidet_dtype_to_dl(const char* name, DLDataType* out_dtype);

/*! \brief Opaque handle of a loaded compiled graph. */
typedef struct HidetGraph_* HidetGraphHandle;
/*! \brief Opaque handle of a compiled graph captured into a CUDA graph. */
typedef struct HidetCudaGraph_* HidetCudaGraphHandle;

/*! \brief Description of a graph input or output. */
typedef struct {
  const char* name;     /* as the artifact names it, e.g. "x" */
  const char* dtype;    /* hidet's dtype name, e.g. "float16" */
  int32_t ndim;
  const int64_t* shape; /* ndim extents (-1 for a symbolic dimension) */
  uint64_t nbytes;      /* bytes of the (contiguous) tensor; 0 when its shape is symbolic */
} HidetTensorInfo;      /* strings and arrays are owned by the graph: valid until hidet_graph_free */

/*!
 * \brief Load a compiled graph from an artifact file.
 * \param path The file; copied, not kept (the file may be removed once the call returns).
 * \param device_id The CUDA device to load a CUDA artifact onto; ignored for CPU artifacts.
 * \param out_graph Written with a handle the caller frees with hidet_graph_free.
 * A missing, truncated or corrupt file, a manifest of another format version, an invalid
 * manifest, a CUDA artifact where no GPU is present or where the device is older than the
 * artifact's arch, and kernel libraries that cannot be loaded are errors naming the file.
 */
HIDET_API int hidet_graph_load(const char* path, int32_t device_id, HidetGraphHandle* out_graph);

/*!
 * \brief Load a compiled graph from the bytes of an artifact in host memory.
 * \param data, size The artifact's bytes; read during the call only (the caller keeps ownership).
 * \param source_name How error messages name the artifact (e.g. the file it came from); copied.
 *        NULL: "<memory>".
 * Otherwise as hidet_graph_load.
 */
HIDET_API int hidet_graph_load_from_memory(const void* data, uint64_t size, const char* source_name,
                                           int32_t device_id, HidetGraphHandle* out_graph);

/*!
 * \brief hidet_graph_load_from_memory for the bytes of an artifact the calling process has just built in memory,
 * whose entries carry no hashes (hidet.runtime.artifact.write(..., hashes=False): a large model's weights hashed
 * on writing and again on loading, at about 1 GB/s, only to hand them from Python to the runtime): everything
 * but the entries' hashes is checked as always. Bytes from a file or another process take
 * hidet_graph_load_from_memory, which checks the hashes.
 */
HIDET_API int hidet_graph_load_built(const void* data, uint64_t size, const char* source_name, int32_t device_id,
                                     HidetGraphHandle* out_graph);

/*!
 * \brief hidet_graph_load, loading only the artifact whose SHA-256 is `sha256` (digest pinning; see
 * docs/runtime.md, "Trust"): the whole file's digest is computed and compared before any of it is
 * read, so a file that is not the pinned one is an error naming the file and both digests, e.g.
 * "artifact m.hidet: its SHA-256 is 9f86…, expected 2c26… (the pinned digest): …".
 * \param sha256 64 hex digits (either case; `sha256sum m.hidet` prints them), or NULL for no pinning.
 *        A malformed digest is an error. Copied, not kept.
 * SHA-256 comes from OpenSSL's libcrypto (libcrypto.so.3 or .so.1.1), loaded on first use: where it is
 * missing, pinning is an error saying so (loading without a digest needs no libcrypto).
 */
HIDET_API int hidet_graph_load_pinned(const char* path, int32_t device_id, const char* sha256,
                                      HidetGraphHandle* out_graph);

/*! \brief hidet_graph_load_from_memory with digest pinning, as hidet_graph_load_pinned. */
HIDET_API int hidet_graph_load_from_memory_pinned(const void* data, uint64_t size, const char* source_name,
                                                  int32_t device_id, const char* sha256,
                                                  HidetGraphHandle* out_graph);

/*!
 * \brief The SHA-256 of `nbytes` bytes at `data` (host memory), as 64 lowercase hex digits and a NUL
 * written to `out_hex` (room for 65 chars): the digest hidet_graph_load_pinned compares. Fails only
 * where libcrypto cannot be loaded.
 */
HIDET_API int hidet_sha256(const void* data, uint64_t nbytes, char* out_hex);

/*! \brief What a loaded graph's (validated) manifest says besides its inputs and outputs. */
typedef struct {
  int64_t format_version;     /* artifact format version (docs/artifact.md) */
  const char* hidet_version;  /* of the writer; "" when the manifest does not say */
  const char* target;         /* "cpu" | "cuda" */
  const char* arch;           /* "x86-64", "sm_90", ... */
  int32_t num_kernels;
  int32_t num_instructions;
  uint64_t arena_nbytes;      /* static graphs: the planned intermediate arena; symbolic graphs: 0 */
  uint64_t weights_nbytes;
  const char* manifest_json;  /* manifest.json's text, for inspection (the loader validated it) */
  uint64_t manifest_nbytes;
} HidetGraphDescription;      /* strings are owned by the graph: valid until hidet_graph_free */

/*! \brief Describe a loaded graph (see HidetGraphDescription). */
HIDET_API int hidet_graph_describe(HidetGraphHandle graph, HidetGraphDescription* out_description);

/*!
 * \brief Dimension `dim` of input (is_output = 0) or output (is_output = 1) `index` as the manifest
 * gives it, in postfix tokens separated by spaces: "16", "batch", or "batch 8 *" (operators + - * / %,
 * C integer semantics). Owned by the graph. For callers that evaluate shapes themselves (the Python
 * runtime); hidet_graph_shape_at evaluates them here.
 */
HIDET_API int hidet_graph_dim_expr(HidetGraphHandle graph, int32_t is_output, int32_t index, int32_t dim,
                                   const char** out_expr);

/*!
 * \brief Free a graph. On CUDA this waits for the device to finish work that may use the graph.
 * CUDA graphs created from it stay valid (they keep what they need alive).
 */
HIDET_API int hidet_graph_free(HidetGraphHandle graph);

/*! \brief The device the graph runs on: kDLCPU, or kDLCUDA with the device id given at load. */
HIDET_API int hidet_graph_device(HidetGraphHandle graph, DLDevice* out_device);

/*! \brief Number of inputs of the graph. */
HIDET_API int hidet_graph_num_inputs(HidetGraphHandle graph, int32_t* out_num_inputs);

/*! \brief Number of outputs of the graph. */
HIDET_API int hidet_graph_num_outputs(HidetGraphHandle graph, int32_t* out_num_outputs);

/*! \brief Name, dtype and shape of input `index` (its pointers are owned by the graph). */
HIDET_API int hidet_graph_input_info(HidetGraphHandle graph, int32_t index, HidetTensorInfo* out_info);

/*! \brief Name, dtype and shape of output `index` (its pointers are owned by the graph). */
HIDET_API int hidet_graph_output_info(HidetGraphHandle graph, int32_t index, HidetTensorInfo* out_info);

/*!
 * \brief Run the graph: enqueue its work on `stream` (CPU graphs run before the call returns).
 * \param inputs num_inputs pointers to contiguous tensors on the graph's device, in the order of
 *        hidet_graph_input_info; owned by the caller and only read, until the work on `stream` is done.
 * \param outputs num_outputs pointers to the caller's contiguous output buffers, which the run
 *        writes; owned by the caller.
 * \param stream The CUDA stream to run on (NULL: the legacy default stream); ignored on the CPU.
 * Wrong counts and NULL pointers (allowed only for empty tensors) are errors naming the input or
 * output, e.g. "input 1 ('x'): null pointer"; a failing kernel is an error naming the instruction,
 * the kernel and the kernel's message. Dtypes, shapes and devices of raw buffers cannot be
 * checked: hidet_graph_run_tensors checks them.
 */
HIDET_API int hidet_graph_run(HidetGraphHandle graph, const void* const* inputs, int32_t num_inputs,
                              void* const* outputs, int32_t num_outputs, HidetStream stream);

/*!
 * \brief Run the graph on DLPack tensors, each checked against the graph before anything runs:
 * the device (the graph's), dtype, shape (the artifact's), contiguity (row-major; strides NULL or
 * compact) and data pointer (non-NULL unless empty) of every input and output. A mismatch is an
 * error naming the tensor and what was expected, e.g.
 * "input 0 ('x'): shape [2, 3], expected [1, 3]". `byte_offset` is honoured.
 * \param inputs num_inputs tensors in the order of hidet_graph_input_info; the DLTensor structs are
 *        read during the call only, their data as in hidet_graph_run.
 * \param outputs num_outputs tensors the run writes; owned by the caller.
 * Otherwise as hidet_graph_run.
 */
HIDET_API int hidet_graph_run_tensors(HidetGraphHandle graph, const DLTensor* inputs, int32_t num_inputs,
                                      const DLTensor* outputs, int32_t num_outputs, HidetStream stream);

/*
 * Symbolic dimensions (artifact format version 2): a graph built from hidet.symbol(['batch', 3, ...])
 * runs at any value of its symbols with one set of kernels. hidet_graph_input_info/output_info give
 * -1 for a symbolic dimension (and nbytes 0 for such a tensor). hidet_graph_run_tensors and
 * hidet_graph_run_alloc read the symbols' values from the inputs' shapes (each symbol must be, by
 * itself, some input's dimension) and check every shape at those values; raw-buffer runs take the
 * values explicitly. The executor plans its intermediate arena once per distinct set of values
 * (a bounded cache) and grows its arena when a run needs more.
 */

/*! \brief Number of symbolic dimensions of the graph (0 for a static graph). */
HIDET_API int hidet_graph_num_symbols(HidetGraphHandle graph, int32_t* out_num_symbols);

/*! \brief Name of symbolic dimension `index` (owned by the graph); values are given in this order. */
HIDET_API int hidet_graph_symbol_name(HidetGraphHandle graph, int32_t index, const char** out_name);

/*!
 * \brief The shape of input (is_output = 0) or output (is_output = 1) `index` at the given symbol
 * values, written to out_shape (room for the tensor's ndim values). Wrong counts or negative values
 * are errors naming the symbols.
 */
HIDET_API int hidet_graph_shape_at(HidetGraphHandle graph, int32_t is_output, int32_t index, const int64_t* symbols,
                                   int32_t num_symbols, int64_t* out_shape);

/*!
 * \brief hidet_graph_run with the values of the graph's symbolic dimensions (num_symbols of them, in
 * the order of hidet_graph_symbol_name); the buffers must hold the shapes at those values.
 */
HIDET_API int hidet_graph_run_dims(HidetGraphHandle graph, const int64_t* symbols, int32_t num_symbols,
                                   const void* const* inputs, int32_t num_inputs, void* const* outputs,
                                   int32_t num_outputs, HidetStream stream);

/*!
 * \brief Run the graph on checked DLPack inputs (as hidet_graph_run_tensors) into outputs the
 * runtime allocates from the device's memory pool.
 * \param out_outputs An array of num_outputs (which must equal the graph's number of outputs)
 *        written with fresh contiguous tensors; the caller owns each and releases it with
 *        `t->deleter(t)` (on CUDA, memory is stream-ordered: release it once work that reads it is
 *        enqueued). On error every entry is NULL and nothing needs releasing.
 */
HIDET_API int hidet_graph_run_alloc(HidetGraphHandle graph, const DLTensor* inputs, int32_t num_inputs,
                                    DLManagedTensor** out_outputs, int32_t num_outputs, HidetStream stream);

/*!
 * \brief Capture a CUDA graph of `graph` (a graph loaded for CUDA; for a CPU graph this is an
 * error saying so). It owns static input, output and arena buffers and keeps `graph`'s kernels
 * and weights alive, even after hidet_graph_free(graph).
 * \param out_cuda_graph Written with a handle the caller frees with hidet_cuda_graph_free.
 */
HIDET_API int hidet_graph_cuda_graph_create(HidetGraphHandle graph, HidetCudaGraphHandle* out_cuda_graph);

/*!
 * \brief hidet_graph_cuda_graph_create for a graph with symbolic dimensions: captured at one shape, the
 * symbols' values `dims` (hidet_graph_num_symbols of them, in hidet_graph_symbol_name order). Its replays take
 * tensors of that shape only; capture one CUDA graph per shape (the Python runtime keeps the most recently used
 * ones, CompiledGraph.cuda_graph()).
 */
HIDET_API int hidet_graph_cuda_graph_create_dims(HidetGraphHandle graph, const int64_t* dims, int32_t num_dims,
                                                 HidetCudaGraphHandle* out_cuda_graph);

/*!
 * \brief Replay a CUDA graph on `stream`: copy the caller's inputs into the static inputs, launch
 * the graph, copy the static outputs into the caller's outputs, all enqueued on `stream`. A later
 * replay (on any stream) waits until this one's outputs are copied out, so results handed out are
 * never overwritten. Arguments and ownership as hidet_graph_run.
 */
HIDET_API int hidet_cuda_graph_run(HidetCudaGraphHandle cuda_graph, const void* const* inputs, int32_t num_inputs,
                                   void* const* outputs, int32_t num_outputs, HidetStream stream);

/*!
 * \brief hidet_cuda_graph_run in two halves, so that a caller can allocate the outputs while the GPU
 * replays: hidet_cuda_graph_launch copies the inputs in and launches the graph on `stream`;
 * hidet_cuda_graph_copy_outputs then enqueues the copies out on the same stream. The two are one
 * replay: a caller sharing the CUDA graph between threads holds its own lock from the launch to the
 * copies (a launch whose outputs are never copied is simply overwritten by the next one). Copying
 * out with no launch before it is an error. The last kernels of a graph that write large outputs alone
 * (8 MiB or more) are not captured: the copy out runs them, on the same stream, straight into `outputs`.
 */
HIDET_API int hidet_cuda_graph_launch(HidetCudaGraphHandle cuda_graph, const void* const* inputs, int32_t num_inputs,
                                      HidetStream stream);
HIDET_API int hidet_cuda_graph_copy_outputs(HidetCudaGraphHandle cuda_graph, void* const* outputs,
                                            int32_t num_outputs, HidetStream stream);

/*!
 * \brief Where each output sits in the CUDA graph's block of static outputs: `offsets` (num_outputs entries,
 * which must equal the graph's number of outputs), and the block's size `out_nbytes` (offsets are multiples
 * of 256 bytes).
 */
HIDET_API int hidet_cuda_graph_output_layout(HidetCudaGraphHandle cuda_graph, uint64_t* offsets, int32_t num_outputs,
                                             uint64_t* out_nbytes);

/*!
 * \brief hidet_cuda_graph_copy_outputs in one copy: the whole block of static outputs into `block`, a buffer
 * of at least hidet_cuda_graph_output_layout's `out_nbytes` bytes, where output i then starts at offsets[i]
 * (the bytes between outputs are padding). One copy instead of one per output: GPT-2's 26 copies took 32 µs
 * of the GPU. The outputs of the graph's uncaptured last kernels (hidet_cuda_graph_copy_outputs) come last in
 * the block; those kernels write them there.
 */
HIDET_API int hidet_cuda_graph_copy_outputs_block(HidetCudaGraphHandle cuda_graph, void* block, HidetStream stream);

/*! \brief hidet_cuda_graph_run on DLPack tensors, checked as in hidet_graph_run_tensors. */
HIDET_API int hidet_cuda_graph_run_tensors(HidetCudaGraphHandle cuda_graph, const DLTensor* inputs,
                                           int32_t num_inputs, const DLTensor* outputs, int32_t num_outputs,
                                           HidetStream stream);

/*! \brief Free a CUDA graph, after waiting for its last replay to finish. */
HIDET_API int hidet_cuda_graph_free(HidetCudaGraphHandle cuda_graph);

#ifdef __cplusplus
}
#endif

#endif /* HIDET_RUNTIME_H */
