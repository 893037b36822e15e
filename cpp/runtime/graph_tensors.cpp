// Running a graph on DLPack tensors (runtime.h: hidet_graph_run_tensors, hidet_graph_run_alloc):
// each tensor is checked against the graph's manifest (device, dtype, shape, contiguity, data) so a
// caller's mistake is an error naming the input and what was expected, never a wrong result.
#include "graph_tensors.hpp"

#include <cstring>
#include <string>

#include "hidet/runtime/error.hpp"

namespace hidet {
namespace {

std::string dl_dtype_str(DLDataType t) {
  const char* name = artifact::dtype_from_dl(t);
  if (name != nullptr) return name;
  return str_cat("DLDataType{code ", int(t.code), ", bits ", int(t.bits), ", lanes ", t.lanes, "}");
}

template <typename T>
std::string shape_str(const T* dims, size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string device_str(DLDevice d) {
  switch (d.device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return str_cat("cuda:", d.device_id);
    case kDLCUDAHost: return "cuda pinned host memory";
    case kDLCUDAManaged: return "cuda managed memory";
    default: return str_cat("DLDevice type ", int(d.device_type));
  }
}

bool contiguous(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  int64_t expected = 1;
  for (int32_t i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;  // size-1 dims may have any stride
    expected *= t.shape[i];
  }
  return true;
}

struct OutputContext {  // DLManagedTensor::manager_ctx of a runtime-allocated output
  std::shared_ptr<Storage> storage;
  std::vector<int64_t> shape;
};

}  // namespace

DLDataType dl_dtype(const std::string& dtype) {
  DLDataType t;
  HIDET_CHECK(artifact::dtype_to_dl(dtype, &t), "unknown dtype '", dtype, "'");
  return t;
}

std::vector<void*> checked_data(const Graph& g, const DLTensor* tensors, int32_t num, bool outputs) {
  const artifact::Manifest& m = g.manifest();
  const std::vector<artifact::IoSpec>& list = outputs ? m.outputs : m.inputs;
  const char* what = outputs ? "output" : "input";
  std::string names;
  for (const auto& io : list) names += (names.empty() ? "" : ", ") + io.name;
  HIDET_CHECK(num == static_cast<int32_t>(list.size()), "the graph ", outputs ? "has " : "takes ", list.size(), " ",
              what, "(s) (", names, "), got ", num);
  HIDET_CHECK(tensors != nullptr || num == 0, "the array of ", what, "s is NULL");
  DLDevice want{g.device().is_cuda() ? kDLCUDA : kDLCPU, g.device().is_cuda() ? g.device().index : 0};
  std::vector<void*> data(num);
  for (int32_t i = 0; i < num; ++i) {
    const DLTensor& t = tensors[i];
    const artifact::TensorSpec& spec = m.tensors[list[i].tensor];
    std::string who = str_cat(what, " ", i, " ('", list[i].name, "')");
    HIDET_CHECK(t.device.device_type == want.device_type && (want.device_type == kDLCPU || t.device.device_id == want.device_id),
                who, ": the tensor is on ", device_str(t.device), " but the graph runs on ", device_str(want));
    DLDataType dt = dl_dtype(spec.dtype);
    HIDET_CHECK(t.dtype.code == dt.code && t.dtype.bits == dt.bits && t.dtype.lanes == dt.lanes, who, ": dtype ",
                dl_dtype_str(t.dtype), ", expected ", spec.dtype);
    HIDET_CHECK(t.ndim >= 0 && (t.shape != nullptr || t.ndim == 0), who, ": invalid DLTensor (ndim ", t.ndim,
                ", shape NULL)");
    bool same_shape = static_cast<size_t>(t.ndim) == spec.shape.size() &&
                      (t.ndim == 0 || std::memcmp(t.shape, spec.shape.data(), sizeof(int64_t) * t.ndim) == 0);
    HIDET_CHECK(same_shape, who, ": shape ", shape_str(t.shape, t.ndim), ", expected ",
                shape_str(spec.shape.data(), spec.shape.size()));
    HIDET_CHECK(contiguous(t), who, ": the tensor is not contiguous (strides ", shape_str(t.strides, t.ndim),
                "); pass a contiguous (row-major) tensor");
    HIDET_CHECK(t.data != nullptr || spec.nbytes == 0, who, ": null data pointer");
    data[i] = t.data == nullptr ? nullptr : static_cast<uint8_t*>(t.data) + t.byte_offset;
  }
  return data;
}

DLManagedTensor* allocate_output(const Graph& g, int32_t index, void* stream) {
  const artifact::TensorSpec& spec = g.manifest().tensors[g.manifest().outputs[index].tensor];
  auto ctx = std::make_unique<OutputContext>();
  ctx->storage = Storage::allocate(g.device(), spec.nbytes, stream);
  ctx->shape = spec.shape;
  auto managed = std::make_unique<DLManagedTensor>();
  DLTensor& t = managed->dl_tensor;
  t.data = ctx->storage->ptr();
  t.device = DLDevice{g.device().is_cuda() ? kDLCUDA : kDLCPU, g.device().is_cuda() ? g.device().index : 0};
  t.ndim = static_cast<int32_t>(ctx->shape.size());
  t.dtype = dl_dtype(spec.dtype);
  t.shape = ctx->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  managed->manager_ctx = ctx.release();
  managed->deleter = [](DLManagedTensor* self) {
    delete static_cast<OutputContext*>(self->manager_ctx);
    delete self;
  };
  return managed.release();
}

}  // namespace hidet
