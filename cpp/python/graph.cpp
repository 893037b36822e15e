// Python face of compiled graphs (runtime.h, "compiled graphs"): _C.Graph and _C.CudaGraph hold a
// C handle each; python/hidet/runtime/compiled_graph.py wraps them. Loading, running and capturing
// release the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "hidet/runtime.h"

namespace py = pybind11;

namespace hidet {
namespace python {
namespace {

struct Graph {
  HidetGraphHandle handle = nullptr;
  ~Graph() {
    if (handle) hidet_graph_free(handle);
  }
};

struct CudaGraph {
  HidetCudaGraphHandle handle = nullptr;
  ~CudaGraph() {
    if (handle) hidet_cuda_graph_free(handle);
  }
};

// Run a C API call without the GIL, then raise its error (with the GIL) if it failed.
template <typename F>
void nogil(F&& f) {
  int status;
  {
    py::gil_scoped_release release;
    status = f();
  }
  check(status);
}

std::vector<void*> pointers(const std::vector<uintptr_t>& addrs) {
  std::vector<void*> ptrs;
  ptrs.reserve(addrs.size());
  for (uintptr_t a : addrs) ptrs.push_back(reinterpret_cast<void*>(a));
  return ptrs;
}

// [(name, dtype, shape, nbytes, dim_exprs)] of the inputs or outputs.
py::list tensor_infos(const Graph& g, bool outputs) {
  int32_t n = 0;
  check(outputs ? hidet_graph_num_outputs(g.handle, &n) : hidet_graph_num_inputs(g.handle, &n));
  py::list result;
  for (int32_t i = 0; i < n; ++i) {
    HidetTensorInfo info;
    check(outputs ? hidet_graph_output_info(g.handle, i, &info) : hidet_graph_input_info(g.handle, i, &info));
    py::tuple shape(info.ndim);
    for (int32_t d = 0; d < info.ndim; ++d) shape[d] = info.shape[d];
    py::tuple exprs(info.ndim);  // each dimension as the manifest gives it (hidet_graph_dim_expr)
    for (int32_t d = 0; d < info.ndim; ++d) {
      const char* expr = nullptr;
      check(hidet_graph_dim_expr(g.handle, outputs ? 1 : 0, i, d, &expr));
      exprs[d] = std::string(expr);
    }
    result.append(py::make_tuple(std::string(info.name), std::string(info.dtype), shape, info.nbytes, exprs));
  }
  return result;
}

template <typename Run>
void run_with(Run run, const std::vector<uintptr_t>& inputs, const std::vector<uintptr_t>& outputs, uintptr_t stream) {
  std::vector<void*> in = pointers(inputs), out = pointers(outputs);
  nogil([&] {
    return run(const_cast<const void* const*>(in.data()), static_cast<int32_t>(in.size()), out.data(),
               static_cast<int32_t>(out.size()), reinterpret_cast<HidetStream>(stream));
  });
}

}  // namespace

void bind_graph(py::module_& m) {
  py::class_<CudaGraph, std::shared_ptr<CudaGraph>>(m, "CudaGraph",
                                                    "A compiled graph captured into a CUDA graph (Graph.cuda_graph()).")
      .def(
          "run",
          [](const CudaGraph& cg, const std::vector<uintptr_t>& inputs, const std::vector<uintptr_t>& outputs,
             uintptr_t stream) {
            run_with([&](auto... args) { return hidet_cuda_graph_run(cg.handle, args...); }, inputs, outputs, stream);
          },
          py::arg("input_addrs"), py::arg("output_addrs"), py::arg("stream") = 0,
          "Copy the inputs in, replay, copy the outputs out: all enqueued on `stream`.")
      .def(
          "launch",
          [](const CudaGraph& cg, const std::vector<uintptr_t>& inputs, uintptr_t stream) {
            std::vector<void*> in = pointers(inputs);
            nogil([&] {
              return hidet_cuda_graph_launch(cg.handle, const_cast<const void* const*>(in.data()),
                                             static_cast<int32_t>(in.size()), reinterpret_cast<HidetStream>(stream));
            });
          },
          py::arg("input_addrs"), py::arg("stream") = 0,
          "run()'s first half: copy the inputs in and replay; copy_outputs() follows.")
      .def(
          "copy_outputs",
          [](const CudaGraph& cg, const std::vector<uintptr_t>& outputs, uintptr_t stream) {
            std::vector<void*> out = pointers(outputs);
            nogil([&] {
              return hidet_cuda_graph_copy_outputs(cg.handle, out.data(), static_cast<int32_t>(out.size()),
                                                   reinterpret_cast<HidetStream>(stream));
            });
          },
          py::arg("output_addrs"), py::arg("stream") = 0,
          "run()'s second half: copy the last launch's outputs out.")
      .def(
          "copy_outputs_block",
          [](const CudaGraph& cg, uintptr_t block, uintptr_t stream) {
            nogil([&] {
              return hidet_cuda_graph_copy_outputs_block(cg.handle, reinterpret_cast<void*>(block),
                                                         reinterpret_cast<HidetStream>(stream));
            });
          },
          py::arg("block_addr"), py::arg("stream") = 0,
          "run()'s second half in one copy: the static outputs' block into the block at `block_addr`.")
      .def(
          "output_layout",
          [](const CudaGraph& cg, int32_t num_outputs) {
            std::vector<uint64_t> offsets(num_outputs);
            uint64_t nbytes = 0;
            check(hidet_cuda_graph_output_layout(cg.handle, offsets.data(), num_outputs, &nbytes));
            return py::make_tuple(offsets, nbytes);
          },
          py::arg("num_outputs"),
          "(each output's offset in the static outputs' block, the block's size): copy_outputs_block.");

  py::class_<Graph, std::shared_ptr<Graph>>(m, "Graph", "A compiled graph (an artifact loaded by the C++ runtime).")
      .def_static(
          "load",
          [](const std::string& path, int32_t device_id, const py::object& sha256) {
            auto g = std::make_shared<Graph>();
            std::string pin = sha256.is_none() ? std::string() : sha256.cast<std::string>();
            nogil([&] {
              return hidet_graph_load_pinned(path.c_str(), device_id, sha256.is_none() ? nullptr : pin.c_str(),
                                             &g->handle);
            });
            return g;
          },
          py::arg("path"), py::arg("device_id") = 0, py::arg("sha256") = py::none(),
          "Load an artifact file (device_id: the GPU for CUDA artifacts; sha256: its pinned digest).")
      .def_static(
          "load_bytes",
          [](const py::buffer& data, int32_t device_id, const std::string& source, const py::object& sha256,
             bool hashed) {
            py::buffer_info buf = data.request();  // holds a view of `data` until it goes
            auto g = std::make_shared<Graph>();
            uint64_t size = static_cast<uint64_t>(buf.size) * static_cast<uint64_t>(buf.itemsize);
            std::string pin = sha256.is_none() ? std::string() : sha256.cast<std::string>();
            if (!hashed && !sha256.is_none()) {
              throw std::invalid_argument("load_bytes: a pinned digest is of hashed bytes (hashed=True)");
            }
            nogil([&] {
              if (!hashed) return hidet_graph_load_built(buf.ptr, size, source.c_str(), device_id, &g->handle);
              return hidet_graph_load_from_memory_pinned(buf.ptr, size, source.c_str(), device_id,
                                                         sha256.is_none() ? nullptr : pin.c_str(), &g->handle);
            });
            return g;
          },
          py::arg("data"), py::arg("device_id") = 0, py::arg("source") = "<memory>", py::arg("sha256") = py::none(),
          py::arg("hashed") = true,
          "Load an artifact from its bytes; `source` names it in error messages; `sha256` (64 hex digits) "
          "pins the bytes' digest; `hashed` False: bytes this process built without entry hashes "
          "(hidet_graph_load_built).")
      .def_property_readonly(
          "description",
          [](const Graph& g) {
            HidetGraphDescription d;
            check(hidet_graph_describe(g.handle, &d));
            py::dict out;
            out["format_version"] = d.format_version;
            out["hidet_version"] = std::string(d.hidet_version);
            out["target"] = std::string(d.target);
            out["arch"] = std::string(d.arch);
            out["num_kernels"] = d.num_kernels;
            out["num_instructions"] = d.num_instructions;
            out["arena_nbytes"] = d.arena_nbytes;
            out["weights_nbytes"] = d.weights_nbytes;
            out["manifest_json"] = py::bytes(d.manifest_json, d.manifest_nbytes);
            return out;
          },
          "What the validated manifest says besides inputs and outputs (hidet_graph_describe), as a dict.")
      .def_property_readonly("inputs", [](const Graph& g) { return tensor_infos(g, false); },
                             "[(name, dtype, shape, nbytes, dim_exprs)] of the inputs (shape: -1 where symbolic; dim_exprs: each "
                             "dimension's postfix text, e.g. 'batch 8 *')")
      .def_property_readonly("outputs", [](const Graph& g) { return tensor_infos(g, true); },
                             "[(name, dtype, shape, nbytes, dim_exprs)] of the outputs")
      .def_property_readonly(
          "device",
          [](const Graph& g) {
            DLDevice d;
            check(hidet_graph_device(g.handle, &d));
            return py::make_tuple(static_cast<int>(d.device_type), d.device_id);
          },
          "(kind, index): kind 1 for cpu, 2 for cuda")
      .def(
          "run",
          [](const Graph& g, const std::vector<uintptr_t>& inputs, const std::vector<uintptr_t>& outputs,
             uintptr_t stream, const std::vector<int64_t>& symbols) {
            run_with(
                [&](auto... args) {
                  return hidet_graph_run_dims(g.handle, symbols.data(), static_cast<int32_t>(symbols.size()), args...);
                },
                inputs, outputs, stream);
          },
          py::arg("input_addrs"), py::arg("output_addrs"), py::arg("stream") = 0,
          py::arg("symbols") = std::vector<int64_t>{},
          "Run on the buffers at the given addresses, enqueued on `stream` (CPU graphs run synchronously); "
          "`symbols`: the values of the graph's symbolic dimensions.")
      .def_property_readonly(
          "symbols",
          [](const Graph& g) {
            int32_t n = 0;
            check(hidet_graph_num_symbols(g.handle, &n));
            std::vector<std::string> names;
            for (int32_t i = 0; i < n; ++i) {
              const char* name = nullptr;
              check(hidet_graph_symbol_name(g.handle, i, &name));
              names.emplace_back(name);
            }
            return names;
          },
          "Names of the symbolic dimensions, in the order run() takes their values.")
      .def(
          "cuda_graph",
          [](const Graph& g, const std::vector<int64_t>& dims) {
            auto cg = std::make_shared<CudaGraph>();
            nogil([&] {
              return hidet_graph_cuda_graph_create_dims(g.handle, dims.data(), static_cast<int32_t>(dims.size()),
                                                        &cg->handle);
            });
            return cg;
          },
          py::arg("dims") = std::vector<int64_t>{},
          "Capture the graph into a CUDA graph (an error for a CPU graph), at the symbols' values `dims` for a "
          "graph with symbolic dimensions.");
}

}  // namespace python
}  // namespace hidet
