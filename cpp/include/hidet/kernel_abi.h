/*
 * hidet kernel ABI (DESIGN.md contract 1).
 *
 * Every kernel library that hidet builds (CUDA or CPU) is a shared object exporting plain C
 * functions with one uniform signature, so the runtime can launch any kernel without knowing its
 * source:
 *
 *     int32_t name(void* const* buffers, int32_t num_buffers,
 *                  const int64_t* dims, int32_t num_dims, void* stream);
 *
 *   buffers  device (or host) pointers of the kernel's tensors, inputs first, then outputs.
 *            Owned by the caller; valid for the duration of the (asynchronous) work.
 *   dims     current values of the symbolic dimensions the kernel was built with, in the order
 *            the kernel declares them. Owned by the caller; read before the function returns.
 *   stream   the CUstream / cudaStream_t to launch on (NULL: the legacy default stream). CPU
 *            kernels ignore it and run synchronously.
 *   returns  0 on success; anything else is an error whose message the library's
 *            hidet_kernel_last_error() returns on the same thread.
 *
 * The launcher computes its own grid from `dims`. Every kernel `name` is declared by its signature,
 * exported beside it (a library binds only the kernels it declares):
 *
 *     const char* hidet_signature_<name>(void);
 *
 * returning JSON text: {"buffers": [{"dtype": "float16", "shape": [...]}, ...], "dims": ["batch", ...]}.
 * `buffers` lists the kernel's tensors in the order of `buffers` above, each with its dtype and its
 * shape: dimensions as in an artifact's manifest (an integer, the name of one of `dims`, or a postfix
 * list of integers, names and + - * / %), or null for a pointer whose extent the kernel does not fix.
 * `dims` names the kernel's symbolic dimensions in the order of `dims` above. A graph's loader checks
 * every instruction's tensors against this before anything runs (docs/runtime.md).
 *
 * Besides its kernels and their signatures, a library exports:
 *
 *     int32_t     hidet_kernel_abi_version(void);   // must equal HIDET_KERNEL_ABI_VERSION
 *     const char* hidet_kernel_last_error(void);    // message of the last failure on this thread
 */
#ifndef HIDET_KERNEL_ABI_H
#define HIDET_KERNEL_ABI_H

#include <stdint.h>

#define HIDET_KERNEL_ABI_VERSION 2  /* 2: kernels declare their signatures */

#ifdef __cplusplus
#define HIDET_KERNEL_EXPORT extern "C" __attribute__((visibility("default")))
#else
#define HIDET_KERNEL_EXPORT __attribute__((visibility("default")))
#endif

/*! \brief The uniform signature of every kernel entry point. */
typedef int32_t (*hidet_kernel_fn)(void* const* buffers, int32_t num_buffers, const int64_t* dims,
                                   int32_t num_dims, void* stream);

/*! \brief Signature of the exported `hidet_kernel_abi_version`. */
typedef int32_t (*hidet_kernel_abi_version_fn)(void);

/*! \brief Signature of the exported `hidet_kernel_last_error`. */
typedef const char* (*hidet_kernel_last_error_fn)(void);

/*! \brief Signature of the exported `hidet_signature_<name>` that declares kernel `name`. */
typedef const char* (*hidet_kernel_signature_fn)(void);

/*! \brief The prefix of the symbol that declares a kernel: `hidet_signature_<name>`. */
#define HIDET_KERNEL_SIGNATURE_PREFIX "hidet_signature_"

#endif /* HIDET_KERNEL_ABI_H */
