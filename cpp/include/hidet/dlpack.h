/*
 * DLPack data structures (https://dmlc.github.io/dlpack/), the exchange format hidet uses to share
 * tensors with PyTorch and other frameworks without copies. Only the plain-C layout is declared
 * here; it must match the DLPack ABI byte for byte (major version 1).
 */
#ifndef HIDET_DLPACK_H
#define HIDET_DLPACK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HIDET_DLPACK_MAJOR_VERSION 1
#define HIDET_DLPACK_MINOR_VERSION 0

typedef enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 } DLDeviceType;

typedef struct {
  int32_t device_type; /* a DLDeviceType */
  int32_t device_id;
} DLDevice;

typedef enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLComplex = 5, kDLBool = 6 } DLDataTypeCode;

typedef struct {
  uint8_t code; /* a DLDataTypeCode */
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides; /* in elements; NULL means compact row-major */
  uint64_t byte_offset;
} DLTensor;

/* Legacy (pre-1.0) managed tensor, PyCapsule name "dltensor". */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)

/* Versioned (>= 1.0) managed tensor, PyCapsule name "dltensor_versioned". */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
}
#endif

#endif /* HIDET_DLPACK_H */
