// The C API of compiled graphs (runtime.h, "compiled graphs"): thin wrappers over graph.hpp.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "artifact.hpp"
#include "c_api_common.hpp"
#include "graph.hpp"
#include "graph_tensors.hpp"
#include "sha256.hpp"

struct HidetGraph_ {
  std::shared_ptr<hidet::Graph> graph;
};

struct HidetCudaGraph_ {
  std::unique_ptr<hidet::CudaGraph> cuda_graph;
};

namespace {

void fill_info(const hidet::Graph& g, const std::vector<hidet::artifact::IoSpec>& list, const char* what,
               int32_t index, HidetTensorInfo* out) {
  HIDET_CHECK(index >= 0 && index < static_cast<int32_t>(list.size()), what, " index ", index,
              " is out of range: the graph has ", list.size(), " ", what, "s");
  const hidet::artifact::IoSpec& io = list[index];
  const hidet::artifact::TensorSpec& t = g.manifest().tensors[io.tensor];
  out->name = io.name.c_str();
  out->dtype = t.dtype.c_str();
  out->ndim = static_cast<int32_t>(t.shape.size());
  out->shape = t.shape.data();
  out->nbytes = t.nbytes;
}

// Check DLPack inputs and outputs against `g`, then run `runner` (the graph or its CUDA graph) on them.
void run_checked(hidet::Graph& g, const DLTensor* inputs, int32_t num_inputs, const DLTensor* outputs,
                 int32_t num_outputs, void* stream) {
  std::vector<int64_t> symbols = hidet::bind_symbols(g, inputs, num_inputs);
  std::vector<void*> in = hidet::checked_data(g, inputs, num_inputs, false, symbols);
  std::vector<void*> out = hidet::checked_data(g, outputs, num_outputs, true, symbols);
  g.run(in.data(), num_inputs, out.data(), num_outputs, stream, symbols);
}

void run_checked(hidet::CudaGraph& cg, const DLTensor* inputs, int32_t num_inputs, const DLTensor* outputs,
                 int32_t num_outputs, void* stream) {
  std::vector<void*> in = hidet::checked_data(cg.graph(), inputs, num_inputs, false, cg.symbols());
  std::vector<void*> out = hidet::checked_data(cg.graph(), outputs, num_outputs, true, cg.symbols());
  cg.run(in.data(), num_inputs, out.data(), num_outputs, stream);
}

}  // namespace

extern "C" {

int hidet_dtype_to_dl(const char* name, DLDataType* out_dtype) {
  API_BEGIN();
  CHECK_NOT_NULL(name);
  CHECK_NOT_NULL(out_dtype);
  *out_dtype = hidet::dl_dtype(name);
  API_END();
}

int hidet_graph_load(const char* path, int32_t device_id, HidetGraphHandle* out_graph) {
  API_BEGIN();
  CHECK_NOT_NULL(path);
  CHECK_NOT_NULL(out_graph);
  std::unique_ptr<hidet::artifact::Container> container = hidet::artifact::Container::open_file(path);
  *out_graph = new HidetGraph_{hidet::Graph::load(*container, device_id)};
  API_END();
}

int hidet_graph_load_from_memory(const void* data, uint64_t size, const char* source_name, int32_t device_id,
                                 HidetGraphHandle* out_graph) {
  API_BEGIN();
  CHECK_NOT_NULL(out_graph);
  auto container =
      hidet::artifact::Container::from_memory(data, size, source_name != nullptr ? source_name : "<memory>");
  *out_graph = new HidetGraph_{hidet::Graph::load(*container, device_id)};
  API_END();
}

int hidet_graph_load_built(const void* data, uint64_t size, const char* source_name, int32_t device_id,
                           HidetGraphHandle* out_graph) {
  API_BEGIN();
  CHECK_NOT_NULL(out_graph);
  auto container = hidet::artifact::Container::from_memory(data, size, source_name != nullptr ? source_name : "<memory>",
                                                           nullptr, /*check_hashes=*/false);
  *out_graph = new HidetGraph_{hidet::Graph::load(*container, device_id)};
  API_END();
}

int hidet_graph_load_pinned(const char* path, int32_t device_id, const char* sha256, HidetGraphHandle* out_graph) {
  API_BEGIN();
  CHECK_NOT_NULL(path);
  CHECK_NOT_NULL(out_graph);
  std::unique_ptr<hidet::artifact::Container> container = hidet::artifact::Container::open_file(path, sha256);
  *out_graph = new HidetGraph_{hidet::Graph::load(*container, device_id)};
  API_END();
}

int hidet_graph_load_from_memory_pinned(const void* data, uint64_t size, const char* source_name, int32_t device_id,
                                        const char* sha256, HidetGraphHandle* out_graph) {
  API_BEGIN();
  CHECK_NOT_NULL(out_graph);
  auto container = hidet::artifact::Container::from_memory(data, size, source_name != nullptr ? source_name : "<memory>",
                                                           sha256);
  *out_graph = new HidetGraph_{hidet::Graph::load(*container, device_id)};
  API_END();
}

int hidet_sha256(const void* data, uint64_t nbytes, char* out_hex) {
  API_BEGIN();
  CHECK_NOT_NULL(out_hex);
  HIDET_CHECK(data != nullptr || nbytes == 0, "hidet_sha256: data is NULL");
  std::string hex = hidet::sha256::hex(hidet::sha256::of(data, nbytes));
  std::memcpy(out_hex, hex.c_str(), hex.size() + 1);
  API_END();
}

int hidet_graph_describe(HidetGraphHandle graph, HidetGraphDescription* out_description) {
  API_BEGIN();
  CHECK_NOT_NULL(graph);
  CHECK_NOT_NULL(out_description);
  const hidet::artifact::Manifest& m = graph->graph->manifest();
  HidetGraphDescription& d = *out_description;
  d.format_version = m.format_version;
  d.hidet_version = m.hidet_version.c_str();
  d.target = m.target.c_str();
  d.arch = m.arch.c_str();
  d.num_kernels = static_cast<int32_t>(m.kernels.size());
  d.num_instructions = static_cast<int32_t>(m.instructions.size());
  d.arena_nbytes = m.symbolic() ? 0 : m.arena_nbytes;
  d.weights_nbytes = m.weights_nbytes;
  d.manifest_json = m.json.c_str();
  d.manifest_nbytes = m.json.size();
  API_END();
}

int hidet_graph_dim_expr(HidetGraphHandle graph, int32_t is_output, int32_t index, int32_t dim, const char** out_expr) {
  API_BEGIN();
  CHECK_NOT_NULL(graph);
  CHECK_NOT_NULL(out_expr);
  const auto& m = graph->graph->manifest();
  const auto& list = is_output ? m.outputs : m.inputs;
  const char* what = is_output ? "output" : "input";
  HIDET_CHECK(index >= 0 && index < static_cast<int32_t>(list.size()), what, " index ", index,
              " is out of range: the graph has ", list.size(), " ", what, "s");
  const auto& texts = m.tensors[list[index].tensor].dim_texts;
  HIDET_CHECK(dim >= 0 && dim < static_cast<int32_t>(texts.size()), what, " ", index, " ('", list[index].name,
              "'): dimension ", dim, " is out of range: it has ", texts.size());
  *out_expr = texts[dim].c_str();
  API_END();
}

int hidet_graph_free(HidetGraphHandle graph) {
  API_BEGIN();
  CHECK_NOT_NULL(graph);
  delete graph;
  API_END();
}

int hidet_graph_device(HidetGraphHandle graph, DLDevice* out_device) {
  API_BEGIN();
  CHECK_NOT_NULL(graph);
  CHECK_NOT_NULL(out_device);
  hidet::Device d = graph->graph->device();
  *out_device = DLDevice{d.is_cuda() ? kDLCUDA : kDLCPU, d.is_cuda() ? d.index : 0};
  API_END();
}

int hidet_graph_num_inputs(HidetGraphHandle graph, int32_t* out_num_inputs) {
  API_BEGIN();
  CHECK_NOT_NULL(graph);
  CHECK_NOT_NULL(out_num_inputs);
  *out_num_inputs = static_cast<int32_t>(graph->graph->manifest().inputs.size());
  API_END();
}

int hidet_graph_num_outputs(HidetGraphHandle graph, int32_t* out_num_outputs) {
  API_BEGIN();
  CHECK_NOT_NULL(graph);
  CHECK_NOT_NULL(out_num_outputs);
  *out_num_outputs = static_cast<int32_t>(graph->graph->manifest().outputs.size());
  API_END();
}

int hidet_graph_input_info(HidetGraphHandle graph, int32_t index, HidetTensorInfo* out_info) {
  API_BEGIN();
  CHECK_NOT_NULL(graph);
  CHECK_NOT_NULL(out_info);
  fill_info(*graph->graph, graph->graph->manifest().inputs, "input", index, out_info);
  API_END();
}

int hidet_graph_output_info(HidetGraphHandle graph, int32_t index, HidetTensorInfo* out_info) {
  API_BEGIN();
  CHECK_NOT_NULL(graph);
  CHECK_NOT_NULL(out_info);
  fill_info(*graph->graph, graph->graph->manifest().outputs, "output", index, out_info);
  API_END();
}

int hidet_graph_run(HidetGraphHandle graph, const void* const* inputs, int32_t num_inputs, void* const* outputs,
                    int32_t num_outputs, HidetStream stream) {
  API_BEGIN();
  CHECK_NOT_NULL(graph);
  graph->graph->run(inputs, num_inputs, outputs, num_outputs, stream);
  API_END();
}

int hidet_graph_num_symbols(HidetGraphHandle graph, int32_t* out_num_symbols) {
  API_BEGIN();
  CHECK_NOT_NULL(graph);
  CHECK_NOT_NULL(out_num_symbols);
  *out_num_symbols = static_cast<int32_t>(graph->graph->manifest().symbols.size());
  API_END();
}

int hidet_graph_symbol_name(HidetGraphHandle graph, int32_t index, const char** out_name) {
  API_BEGIN();
  CHECK_NOT_NULL(graph);
  CHECK_NOT_NULL(out_name);
  const auto& symbols = graph->graph->manifest().symbols;
  HIDET_CHECK(index >= 0 && index < static_cast<int32_t>(symbols.size()), "symbol index ", index,
              " is out of range: the graph has ", symbols.size(), " symbolic dimension(s)");
  *out_name = symbols[index].c_str();
  API_END();
}

int hidet_graph_shape_at(HidetGraphHandle graph, int32_t is_output, int32_t index, const int64_t* symbols,
                         int32_t num_symbols, int64_t* out_shape) {
  API_BEGIN();
  CHECK_NOT_NULL(graph);
  CHECK_NOT_NULL(out_shape);
  HIDET_CHECK(symbols != nullptr || num_symbols == 0, "the array of symbol values is NULL");
  const auto& m = graph->graph->manifest();
  const auto& list = is_output ? m.outputs : m.inputs;
  HIDET_CHECK(index >= 0 && index < static_cast<int32_t>(list.size()), is_output ? "output" : "input", " index ",
              index, " is out of range: the graph has ", list.size());
  std::vector<int64_t> values(symbols, symbols + num_symbols);
  graph->graph->plan(values);  // checks the count and the values
  std::vector<int64_t> shape = m.tensors[list[index].tensor].shape_at(values);
  std::copy(shape.begin(), shape.end(), out_shape);
  API_END();
}

int hidet_graph_run_dims(HidetGraphHandle graph, const int64_t* symbols, int32_t num_symbols,
                         const void* const* inputs, int32_t num_inputs, void* const* outputs, int32_t num_outputs,
                         HidetStream stream) {
  API_BEGIN();
  CHECK_NOT_NULL(graph);
  HIDET_CHECK(symbols != nullptr || num_symbols == 0, "the array of symbol values is NULL");
  graph->graph->run(inputs, num_inputs, outputs, num_outputs, stream,
                    std::vector<int64_t>(symbols, symbols + num_symbols));
  API_END();
}

int hidet_graph_run_tensors(HidetGraphHandle graph, const DLTensor* inputs, int32_t num_inputs,
                            const DLTensor* outputs, int32_t num_outputs, HidetStream stream) {
  API_BEGIN();
  CHECK_NOT_NULL(graph);
  run_checked(*graph->graph, inputs, num_inputs, outputs, num_outputs, stream);
  API_END();
}

int hidet_graph_run_alloc(HidetGraphHandle graph, const DLTensor* inputs, int32_t num_inputs,
                          DLManagedTensor** out_outputs, int32_t num_outputs, HidetStream stream) {
  std::vector<DLManagedTensor*> allocated;
  API_BEGIN();
  CHECK_NOT_NULL(graph);
  CHECK_NOT_NULL(out_outputs);
  hidet::Graph& g = *graph->graph;
  for (int32_t i = 0; i < num_outputs; ++i) out_outputs[i] = nullptr;
  std::vector<int64_t> symbols = hidet::bind_symbols(g, inputs, num_inputs);
  std::vector<void*> in = hidet::checked_data(g, inputs, num_inputs, false, symbols);
  HIDET_CHECK(num_outputs == static_cast<int32_t>(g.manifest().outputs.size()), "the graph has ",
              g.manifest().outputs.size(), " output(s), got room for ", num_outputs);
  try {
    std::vector<void*> out;
    for (int32_t i = 0; i < num_outputs; ++i) {
      allocated.push_back(hidet::allocate_output(g, i, stream, symbols));
      out.push_back(allocated.back()->dl_tensor.data);
    }
    g.run(in.data(), num_inputs, out.data(), num_outputs, stream, symbols);
  } catch (...) {
    for (DLManagedTensor* t : allocated) t->deleter(t);
    throw;
  }
  for (int32_t i = 0; i < num_outputs; ++i) out_outputs[i] = allocated[i];
  API_END();
}

int hidet_graph_cuda_graph_create(HidetGraphHandle graph, HidetCudaGraphHandle* out_cuda_graph) {
  return hidet_graph_cuda_graph_create_dims(graph, nullptr, 0, out_cuda_graph);
}

int hidet_graph_cuda_graph_create_dims(HidetGraphHandle graph, const int64_t* dims, int32_t num_dims,
                                       HidetCudaGraphHandle* out_cuda_graph) {
  API_BEGIN();
  CHECK_NOT_NULL(graph);
  CHECK_NOT_NULL(out_cuda_graph);
  HIDET_CHECK(num_dims == 0 || dims != nullptr, "dims is NULL but num_dims is ", num_dims);
  std::vector<int64_t> symbols(dims, dims + num_dims);
  *out_cuda_graph = new HidetCudaGraph_{std::make_unique<hidet::CudaGraph>(graph->graph, symbols)};
  API_END();
}

int hidet_cuda_graph_run(HidetCudaGraphHandle cuda_graph, const void* const* inputs, int32_t num_inputs,
                         void* const* outputs, int32_t num_outputs, HidetStream stream) {
  API_BEGIN();
  CHECK_NOT_NULL(cuda_graph);
  cuda_graph->cuda_graph->run(inputs, num_inputs, outputs, num_outputs, stream);
  API_END();
}

int hidet_cuda_graph_launch(HidetCudaGraphHandle cuda_graph, const void* const* inputs, int32_t num_inputs,
                            HidetStream stream) {
  API_BEGIN();
  CHECK_NOT_NULL(cuda_graph);
  cuda_graph->cuda_graph->launch(inputs, num_inputs, stream);
  API_END();
}

int hidet_cuda_graph_copy_outputs(HidetCudaGraphHandle cuda_graph, void* const* outputs, int32_t num_outputs,
                                  HidetStream stream) {
  API_BEGIN();
  CHECK_NOT_NULL(cuda_graph);
  cuda_graph->cuda_graph->copy_outputs(outputs, num_outputs, stream);
  API_END();
}

int hidet_cuda_graph_output_layout(HidetCudaGraphHandle cuda_graph, uint64_t* offsets, int32_t num_outputs,
                                   uint64_t* out_nbytes) {
  API_BEGIN();
  CHECK_NOT_NULL(cuda_graph);
  CHECK_NOT_NULL(out_nbytes);
  const std::vector<uint64_t>& layout = cuda_graph->cuda_graph->output_offsets();
  HIDET_CHECK(num_outputs == static_cast<int32_t>(layout.size()), "the graph has ", layout.size(),
              " output(s), got room for ", num_outputs, " offsets");
  HIDET_CHECK(offsets != nullptr || num_outputs == 0, "the array of offsets is NULL");
  for (int32_t i = 0; i < num_outputs; ++i) offsets[i] = layout[i];
  *out_nbytes = cuda_graph->cuda_graph->outputs_nbytes();
  API_END();
}

int hidet_cuda_graph_copy_outputs_block(HidetCudaGraphHandle cuda_graph, void* block, HidetStream stream) {
  API_BEGIN();
  CHECK_NOT_NULL(cuda_graph);
  cuda_graph->cuda_graph->copy_outputs_block(block, stream);
  API_END();
}

int hidet_cuda_graph_run_tensors(HidetCudaGraphHandle cuda_graph, const DLTensor* inputs, int32_t num_inputs,
                                 const DLTensor* outputs, int32_t num_outputs, HidetStream stream) {
  API_BEGIN();
  CHECK_NOT_NULL(cuda_graph);
  run_checked(*cuda_graph->cuda_graph, inputs, num_inputs, outputs, num_outputs, stream);
  API_END();
}

int hidet_cuda_graph_free(HidetCudaGraphHandle cuda_graph) {
  API_BEGIN();
  CHECK_NOT_NULL(cuda_graph);
  delete cuda_graph;
  API_END();
}

}  // extern "C"
