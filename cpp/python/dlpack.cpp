// Zero-copy exchange of tensors through DLPack capsules, both the legacy ("dltensor") and the
// versioned ("dltensor_versioned", DLPack >= 1.0) protocol. Exported tensors keep their hidet
// Storage alive; imported ones keep the producer's managed tensor alive until hidet lets go.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "hidet/dlpack.h"

namespace py = pybind11;

namespace hidet {
namespace python {
namespace {

constexpr const char* kLegacyName = "dltensor";
constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kUsedLegacyName = "used_dltensor";
constexpr const char* kUsedVersionedName = "used_dltensor_versioned";

// What an exported DLTensor points into: the storage it keeps alive and its shape/strides arrays.
struct ExportContext {
  std::shared_ptr<Storage> storage;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

DLTensor make_dl_tensor(ExportContext* ctx, uint8_t code, uint8_t bits) {
  DLTensor t{};
  t.data = ctx->storage->ptr;
  t.device = ctx->storage->device;
  t.ndim = static_cast<int32_t>(ctx->shape.size());
  t.dtype.code = code;
  t.dtype.bits = bits;
  t.dtype.lanes = 1;
  t.shape = ctx->shape.data();
  t.strides = ctx->strides.data();
  t.byte_offset = 0;
  return t;
}

template <typename Managed>
void destroy_unconsumed(PyObject* capsule, const char* name) {
  // Called when the capsule dies; a consumer that took the tensor renamed it, so this is a no-op then.
  if (PyCapsule_IsValid(capsule, name)) {
    auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
    if (managed && managed->deleter) managed->deleter(managed);
  }
}

py::capsule to_dlpack(std::shared_ptr<Storage> storage, const std::vector<int64_t>& shape, int code, int bits,
                      bool versioned) {
  auto* ctx = new ExportContext{std::move(storage), shape, std::vector<int64_t>(shape.size())};
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    ctx->strides[i] = stride;
    stride *= shape[i];
  }
  if (versioned) {
    auto* managed = new DLManagedTensorVersioned{};
    managed->version = {HIDET_DLPACK_MAJOR_VERSION, HIDET_DLPACK_MINOR_VERSION};
    managed->manager_ctx = ctx;
    managed->deleter = [](DLManagedTensorVersioned* self) {
      delete static_cast<ExportContext*>(self->manager_ctx);
      delete self;
    };
    managed->flags = 0;
    managed->dl_tensor = make_dl_tensor(ctx, static_cast<uint8_t>(code), static_cast<uint8_t>(bits));
    PyObject* cap = PyCapsule_New(managed, kVersionedName, [](PyObject* c) {
      destroy_unconsumed<DLManagedTensorVersioned>(c, kVersionedName);
    });
    if (!cap) throw py::error_already_set();
    return py::reinterpret_steal<py::capsule>(cap);
  }
  auto* managed = new DLManagedTensor{};
  managed->manager_ctx = ctx;
  managed->deleter = [](DLManagedTensor* self) {
    delete static_cast<ExportContext*>(self->manager_ctx);
    delete self;
  };
  managed->dl_tensor = make_dl_tensor(ctx, static_cast<uint8_t>(code), static_cast<uint8_t>(bits));
  PyObject* cap =
      PyCapsule_New(managed, kLegacyName, [](PyObject* c) { destroy_unconsumed<DLManagedTensor>(c, kLegacyName); });
  if (!cap) throw py::error_already_set();
  return py::reinterpret_steal<py::capsule>(cap);
}

[[noreturn]] void fail(const std::string& msg) {
  PyErr_SetString(PyExc_ValueError, msg.c_str());
  throw py::error_already_set();
}

DLDevice dl_device_to_hidet(const DLDevice& d) {
  switch (d.device_type) {
    case kDLCPU:
    case kDLCUDAHost:  // pinned host memory is host memory to hidet
      return DLDevice{kDLCPU, 0};
    case kDLCUDA:
      return d;
    default:
      fail("from_dlpack: tensors on DLPack device type " + std::to_string(d.device_type) +
           " are not supported; hidet takes CPU (1) and CUDA (2) tensors");
  }
}

// Take over a producer's tensor: the returned Storage calls `release` when hidet is done with it.
py::tuple import_tensor(const DLTensor& t, std::function<void()> release) {
  if (t.dtype.lanes != 1) fail("from_dlpack: vector dtypes (lanes=" + std::to_string(t.dtype.lanes) + ") are not supported");
  std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  if (t.strides != nullptr && numel > 0) {
    int64_t expected = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && t.strides[i] != expected) {
        std::string strides;
        for (int j = 0; j < t.ndim; ++j) strides += (j ? ", " : "") + std::to_string(t.strides[j]);
        fail("from_dlpack: hidet tensors are contiguous (row-major), but this tensor has strides (" + strides +
             "); make it contiguous first (e.g. torch's .contiguous())");
      }
      expected *= shape[i];
    }
  }
  uint64_t nbytes = static_cast<uint64_t>(numel) * ((t.dtype.bits + 7) / 8);
  void* data = static_cast<char*>(t.data) + t.byte_offset;
  auto storage = std::make_shared<Storage>(dl_device_to_hidet(t.device), data, nbytes, std::move(release));
  return py::make_tuple(storage, shape, static_cast<int>(t.dtype.code), static_cast<int>(t.dtype.bits));
}

py::tuple from_dlpack(py::capsule capsule) {
  PyObject* cap = capsule.ptr();
  if (PyCapsule_IsValid(cap, kVersionedName)) {
    auto* managed = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(cap, kVersionedName));
    if (managed->version.major != HIDET_DLPACK_MAJOR_VERSION)
      fail("from_dlpack: DLPack major version " + std::to_string(managed->version.major) +
           " is not supported (hidet reads version " + std::to_string(HIDET_DLPACK_MAJOR_VERSION) + ")");
    py::tuple result = import_tensor(managed->dl_tensor, [managed]() {
      if (managed->deleter) managed->deleter(managed);
    });
    PyCapsule_SetName(cap, kUsedVersionedName);
    return result;
  }
  if (PyCapsule_IsValid(cap, kLegacyName)) {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, kLegacyName));
    py::tuple result = import_tensor(managed->dl_tensor, [managed]() {
      if (managed->deleter) managed->deleter(managed);
    });
    PyCapsule_SetName(cap, kUsedLegacyName);
    return result;
  }
  fail("from_dlpack: expected an unconsumed DLPack capsule ('dltensor' or 'dltensor_versioned'); "
       "a capsule can be consumed only once");
}

}  // namespace

void bind_dlpack(py::module_& m) {
  m.def("to_dlpack", &to_dlpack, py::arg("storage"), py::arg("shape"), py::arg("code"), py::arg("bits"),
        py::arg("versioned"), "Export a contiguous tensor over `storage` as a DLPack capsule (no copy).");
  m.def("from_dlpack", &from_dlpack, py::arg("capsule"),
        "Consume a DLPack capsule: returns (storage, shape, dtype code, dtype bits) sharing its memory.");
}

}  // namespace python
}  // namespace hidet
