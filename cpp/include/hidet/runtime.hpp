// A thin header-only C++ face of the C API (runtime.h) for serving compiled graphs: RAII handles,
// errors as exceptions. Everything goes through the C functions, so a program built with any C++
// compiler or standard library works with the shipped libhidet_runtime.so.
//
//   hidet::rt::Graph graph("model.hidet");                 // CPU artifact, or cuda:0 for CUDA
//   std::vector<hidet::rt::Tensor> out = graph.run({x});     // x: a DLTensor; outputs allocated
//   float* y = static_cast<float*>(out[0]->data);
//
// Thread safety follows runtime.h: one Graph may be run from several threads at once.
#ifndef HIDET_RUNTIME_HPP
#define HIDET_RUNTIME_HPP

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hidet/runtime.h"

namespace hidet {
namespace rt {

/*! \brief A failing C API call: what() is the runtime's message (hidet_get_last_error). */
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int code = HIDET_ERROR) : std::runtime_error(message), code_(code) {}
  /*! \brief HIDET_ERROR, or HIDET_ERROR_OUT_OF_MEMORY. */
  int code() const { return code_; }

 private:
  int code_;
};

/*! \brief Throw an Error with the thread's last error message when `status` is not 0. */
inline void check(int status) {
  if (status != 0) throw Error(hidet_get_last_error(), status);
}

/*! \brief An output tensor allocated by the runtime; releases its memory when destroyed. */
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(DLManagedTensor* managed) : managed_(managed, &release) {}
  DLTensor* operator->() const { return &managed_->dl_tensor; }
  const DLTensor& dl_tensor() const { return managed_->dl_tensor; }
  /*! \brief Number of bytes of the (contiguous) tensor. */
  uint64_t nbytes() const {
    uint64_t n = (managed_->dl_tensor.dtype.bits * managed_->dl_tensor.dtype.lanes + 7) / 8;
    for (int32_t i = 0; i < managed_->dl_tensor.ndim; ++i) n *= static_cast<uint64_t>(managed_->dl_tensor.shape[i]);
    return n;
  }
  /*! \brief Give up ownership: the caller releases the result with `t->deleter(t)`. */
  DLManagedTensor* release_managed() { return managed_.release(); }

 private:
  static void release(DLManagedTensor* t) {
    if (t != nullptr && t->deleter != nullptr) t->deleter(t);
  }
  std::unique_ptr<DLManagedTensor, void (*)(DLManagedTensor*)> managed_{nullptr, &release};
};

/*! \brief Name, dtype and shape of a graph input or output (copied out of the graph). */
struct TensorInfo {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t nbytes = 0;
};

class CudaGraph;

/*! \brief A compiled graph loaded from an artifact (hidet_graph_*). Movable, not copyable. */
class Graph {
 public:
  /*! \brief Load `path` (onto CUDA device `device_id` for a CUDA artifact). */
  explicit Graph(const std::string& path, int32_t device_id = 0) { check(hidet_graph_load(path.c_str(), device_id, &handle_)); }
  /*!
   * \brief Load `path` only if its SHA-256 is `sha256` (64 hex digits; "" for no pinning): see
   * hidet_graph_load_pinned.
   */
  Graph(const std::string& path, const std::string& sha256, int32_t device_id) {
    check(hidet_graph_load_pinned(path.c_str(), device_id, sha256.empty() ? nullptr : sha256.c_str(), &handle_));
  }
  /*! \brief Load from the bytes of an artifact in memory; `source_name` names it in messages. */
  Graph(const void* data, uint64_t size, const std::string& source_name, int32_t device_id = 0) {
    check(hidet_graph_load_from_memory(data, size, source_name.c_str(), device_id, &handle_));
  }
  ~Graph() {
    if (handle_ != nullptr) hidet_graph_free(handle_);
  }
  Graph(Graph&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Graph& operator=(Graph&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  HidetGraphHandle handle() const { return handle_; }

  DLDevice device() const {
    DLDevice d;
    check(hidet_graph_device(handle_, &d));
    return d;
  }
  std::vector<TensorInfo> inputs() const { return infos(false); }
  std::vector<TensorInfo> outputs() const { return infos(true); }

  /*! \brief Names of the symbolic dimensions (empty for a static graph), in the order values are given. */
  std::vector<std::string> symbols() const {
    int32_t n = 0;
    check(hidet_graph_num_symbols(handle_, &n));
    std::vector<std::string> names;
    for (int32_t i = 0; i < n; ++i) {
      const char* name = nullptr;
      check(hidet_graph_symbol_name(handle_, i, &name));
      names.emplace_back(name);
    }
    return names;
  }
  /*! \brief Inputs / outputs with their shapes and sizes at the given values of the symbols. */
  std::vector<TensorInfo> inputs_at(const std::vector<int64_t>& values) const { return infos_at(false, values); }
  std::vector<TensorInfo> outputs_at(const std::vector<int64_t>& values) const { return infos_at(true, values); }

  /*! \brief Run on checked DLPack tensors into the caller's outputs (hidet_graph_run_tensors). */
  void run(const std::vector<DLTensor>& inputs, const std::vector<DLTensor>& outputs, HidetStream stream = nullptr) {
    check(hidet_graph_run_tensors(handle_, inputs.data(), static_cast<int32_t>(inputs.size()), outputs.data(),
                                  static_cast<int32_t>(outputs.size()), stream));
  }
  /*! \brief Run on checked DLPack tensors into fresh outputs (hidet_graph_run_alloc). */
  std::vector<Tensor> run(const std::vector<DLTensor>& inputs, HidetStream stream = nullptr) {
    std::vector<DLManagedTensor*> raw(outputs().size(), nullptr);
    check(hidet_graph_run_alloc(handle_, inputs.data(), static_cast<int32_t>(inputs.size()), raw.data(),
                                static_cast<int32_t>(raw.size()), stream));
    std::vector<Tensor> result;
    for (DLManagedTensor* t : raw) result.emplace_back(t);
    return result;
  }
  /*! \brief Run on raw buffers: counts and NULL pointers are checked, nothing else (hidet_graph_run). */
  void run_raw(const std::vector<const void*>& inputs, const std::vector<void*>& outputs, HidetStream stream = nullptr) {
    check(hidet_graph_run(handle_, inputs.data(), static_cast<int32_t>(inputs.size()), outputs.data(),
                          static_cast<int32_t>(outputs.size()), stream));
  }

 private:
  std::vector<TensorInfo> infos(bool outputs) const {
    int32_t n = 0;
    check(outputs ? hidet_graph_num_outputs(handle_, &n) : hidet_graph_num_inputs(handle_, &n));
    std::vector<TensorInfo> result;
    for (int32_t i = 0; i < n; ++i) {
      HidetTensorInfo info;
      check(outputs ? hidet_graph_output_info(handle_, i, &info) : hidet_graph_input_info(handle_, i, &info));
      result.push_back({info.name, info.dtype, std::vector<int64_t>(info.shape, info.shape + info.ndim), info.nbytes});
    }
    return result;
  }
  std::vector<TensorInfo> infos_at(bool outputs, const std::vector<int64_t>& values) const;
  HidetGraphHandle handle_ = nullptr;
};

inline std::vector<TensorInfo> Graph::infos_at(bool outputs, const std::vector<int64_t>& values) const {
  std::vector<TensorInfo> result = infos(outputs);
  for (size_t i = 0; i < result.size(); ++i) {
    TensorInfo& info = result[i];
    check(hidet_graph_shape_at(handle_, outputs ? 1 : 0, static_cast<int32_t>(i), values.data(),
                               static_cast<int32_t>(values.size()), info.shape.data()));
    DLDataType t;
    check(hidet_dtype_to_dl(info.dtype.c_str(), &t));
    info.nbytes = (t.bits * t.lanes + 7) / 8;
    for (int64_t d : info.shape) info.nbytes *= static_cast<uint64_t>(d);
  }
  return result;
}

/*! \brief A CUDA graph captured from a Graph (hidet_graph_cuda_graph_create); outlives it safely. */
class CudaGraph {
 public:
  explicit CudaGraph(const Graph& graph) { check(hidet_graph_cuda_graph_create(graph.handle(), &handle_)); }
  ~CudaGraph() {
    if (handle_ != nullptr) hidet_cuda_graph_free(handle_);
  }
  CudaGraph(CudaGraph&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  CudaGraph& operator=(CudaGraph&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  /*! \brief Replay on checked DLPack tensors (hidet_cuda_graph_run_tensors). */
  void run(const std::vector<DLTensor>& inputs, const std::vector<DLTensor>& outputs, HidetStream stream = nullptr) {
    check(hidet_cuda_graph_run_tensors(handle_, inputs.data(), static_cast<int32_t>(inputs.size()), outputs.data(),
                                       static_cast<int32_t>(outputs.size()), stream));
  }

 private:
  HidetCudaGraphHandle handle_ = nullptr;
};

/*! \brief A DLTensor view of a contiguous buffer (no ownership): `shape` must outlive its use. */
inline DLTensor make_dl_tensor(void* data, const std::vector<int64_t>& shape, DLDataType dtype,
                               DLDevice device = DLDevice{kDLCPU, 0}) {
  DLTensor t;
  t.data = data;
  t.device = device;
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = dtype;
  t.shape = const_cast<int64_t*>(shape.data());
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

/*! \brief The DLDataType of a hidet dtype name ("float32", "float16", "bfloat16", "int64", "bool", ...). */
inline DLDataType dtype_from_name(const std::string& name) {
  DLDataType t;
  check(hidet_dtype_to_dl(name.c_str(), &t));
  return t;
}

}  // namespace rt
}  // namespace hidet

#endif  // HIDET_RUNTIME_HPP
