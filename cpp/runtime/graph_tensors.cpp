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

std::string symbols_str(const artifact::Manifest& m, const std::vector<int64_t>& values) {
  std::string s;
  for (size_t i = 0; i < m.symbols.size() && i < values.size(); ++i) {
    s += str_cat(i ? ", " : "", m.symbols[i], "=", values[i]);
  }
  return s;
}

}  // namespace

DLDataType dl_dtype(const std::string& dtype) {
  DLDataType t;
  HIDET_CHECK(artifact::dtype_to_dl(dtype, &t), "unknown dtype '", dtype, "'");
  return t;
}

std::vector<int64_t> bind_symbols(const Graph& g, const DLTensor* inputs, int32_t num) {
  const artifact::Manifest& m = g.manifest();
  if (!m.symbolic()) return {};
  std::vector<int64_t> values(m.symbols.size(), -1);
  std::vector<std::string> from(m.symbols.size());
  for (int32_t i = 0; i < num && i < static_cast<int32_t>(m.inputs.size()) && inputs != nullptr; ++i) {
    const artifact::TensorSpec& spec = m.tensors[m.inputs[i].tensor];
    const DLTensor& t = inputs[i];
    if (t.ndim != static_cast<int32_t>(spec.dims.size()) || t.shape == nullptr) continue;  // checked_data says so
    for (size_t d = 0; d < spec.dims.size(); ++d) {
      const auto& postfix = spec.dims[d].postfix;
      if (postfix.size() != 1 || postfix[0].kind != artifact::Dim::Symbol) continue;
      size_t s = static_cast<size_t>(postfix[0].value);
      std::string where = str_cat("input ", i, " ('", m.inputs[i].name, "') dimension ", d);
      if (values[s] < 0) {
        values[s] = t.shape[d];
        from[s] = where;
      } else {
        HIDET_CHECK(values[s] == t.shape[d], "symbol '", m.symbols[s], "' is ", values[s], " in ", from[s], " but ",
                    t.shape[d], " in ", where);
      }
    }
  }
  for (size_t s = 0; s < values.size(); ++s) {
    HIDET_CHECK(values[s] >= 0, "symbol '", m.symbols[s], "' is no input's dimension by itself, so the inputs do not "
                "give its value: pass the values with hidet_graph_run_dims");
  }
  return values;
}

std::vector<void*> checked_data(const Graph& g, const DLTensor* tensors, int32_t num, bool outputs,
                                const std::vector<int64_t>& symbols) {
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
    std::vector<int64_t> shape = spec.shape_at(symbols);
    bool same_shape = static_cast<size_t>(t.ndim) == shape.size() &&
                      (t.ndim == 0 || std::memcmp(t.shape, shape.data(), sizeof(int64_t) * t.ndim) == 0);
    HIDET_CHECK(same_shape, who, ": shape ", shape_str(t.shape, t.ndim), ", expected ", shape_str(shape.data(), shape.size()),
                spec.symbolic ? str_cat(" (at ", symbols_str(m, symbols), ")") : std::string());
    HIDET_CHECK(contiguous(t), who, ": the tensor is not contiguous (strides ", shape_str(t.strides, t.ndim),
                "); pass a contiguous (row-major) tensor");
    HIDET_CHECK(t.data != nullptr || spec.nbytes_at(symbols) == 0, who, ": null data pointer");
    data[i] = t.data == nullptr ? nullptr : static_cast<uint8_t*>(t.data) + t.byte_offset;
  }
  return data;
}

DLManagedTensor* allocate_output(const Graph& g, int32_t index, void* stream, const std::vector<int64_t>& symbols) {
  const artifact::TensorSpec& spec = g.manifest().tensors[g.manifest().outputs[index].tensor];
  auto ctx = std::make_unique<OutputContext>();
  ctx->storage = Storage::allocate(g.device(), spec.nbytes_at(symbols), stream);
  ctx->shape = spec.shape_at(symbols);
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
