// CUDA graphs of a compiled graph (graph.hpp): captured once with static buffers, replayed with the
// caller's inputs and outputs copied in and out on the caller's stream. A graph with symbolic dimensions is
// captured at one set of their values (one CUDA graph per shape: the Python side keeps the recent ones).
#include <cstdio>
#include <map>
#include <set>

#include "graph.hpp"
#include "hidet/runtime/cuda_driver.hpp"
#include "hidet/runtime/error.hpp"
#include "hidet/runtime/stream.hpp"

namespace hidet {

namespace {

void destroy_quietly(void* exec, void* graph, void* event) {
  try {
    if (exec) cuda::graph_exec_destroy(exec);
    if (graph) cuda::graph_destroy(graph);
    if (event) cuda::event_destroy(event);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hidet: destroying a CUDA graph failed: %s\n", e.what());
  }
}

// The tail: at most kTailInstructions last instructions that write graph outputs alone (each returned once),
// where they write at least kTailMinBytes. The tail runs after each replay, on the caller's stream, writing the
// caller's outputs directly: those outputs are then neither written into static buffers nor copied out of them
// (GPT-2's 24 present key and value tensors at batch 8 x 512, 151 MB in one kernel, were written twice and took
// 107 µs of copies a call). Smaller outputs stay in the graph: each tail instruction is a launch of its own.
constexpr size_t kTailInstructions = 4;
constexpr uint64_t kTailMinBytes = 8 << 20;

size_t tail_start(const artifact::Manifest& m, const Graph::Plan& plan) {
  std::map<int32_t, int> returned;  // tensor -> how many outputs it is
  for (const auto& io : m.outputs) ++returned[io.tensor];
  size_t begin = m.instructions.size();
  uint64_t nbytes = 0;
  for (; begin > 0 && m.instructions.size() - begin < kTailInstructions; --begin) {
    const artifact::Instruction& inst = m.instructions[begin - 1];
    bool outputs_alone = !inst.outputs.empty();
    for (int32_t t : inst.outputs) {
      auto it = returned.find(t);
      outputs_alone = outputs_alone && it != returned.end() && it->second == 1;
    }
    if (!outputs_alone) break;
    for (int32_t t : inst.outputs) nbytes += plan.nbytes[t];
  }
  return nbytes >= kTailMinBytes ? begin : m.instructions.size();
}

}  // namespace

CudaGraph::CudaGraph(std::shared_ptr<Graph> graph, const std::vector<int64_t>& symbols) : graph_(std::move(graph)) {
  Graph& g = *graph_;
  HIDET_CHECK(g.device().is_cuda(), "artifact ", g.source(), " was built for the CPU; CUDA graphs need a graph built ",
              "for CUDA");
  // a symbolic graph is captured at one set of symbol values (Graph::plan checks their count)
  plan_ = g.manifest().symbolic() || !symbols.empty() ? g.plan(symbols)
                                                      : std::shared_ptr<const Graph::Plan>(graph_, &g.static_plan());
  const Graph::Plan& plan = *plan_;
  const Device device = g.device();
  const artifact::Manifest& m = g.manifest();
  cuda::set_device(device.index);
  Stream stream = Stream::create(device.index);  // private: nothing else is enqueued while capturing
  void* s = stream.handle();

  std::vector<void*> out_ptrs;
  for (const auto& io : m.inputs) {
    static_inputs_.push_back(Storage::allocate(device, plan.nbytes[io.tensor], s));
    static_input_ptrs_.push_back(static_inputs_.back()->ptr());
  }
  // The outputs share one block (output_offsets()), so that a caller can take them all with one copy
  // (copy_outputs_block): first those the captured graph writes (static, copied out), then the tail's.
  tail_begin_ = tail_start(m, plan);
  std::set<int32_t> tail_writes;
  for (size_t i = tail_begin_; i < m.instructions.size(); ++i) {
    const artifact::Instruction& inst = m.instructions[i];
    tail_writes.insert(inst.outputs.begin(), inst.outputs.end());
  }
  output_offsets_.assign(m.outputs.size(), 0);
  uint64_t end = 0;
  for (bool tail : {false, true}) {
    for (size_t i = 0; i < m.outputs.size(); ++i) {
      if ((tail_writes.count(m.outputs[i].tensor) > 0) != tail) continue;
      end = (end + kOutputAlign - 1) / kOutputAlign * kOutputAlign;
      output_offsets_[i] = end;
      end += plan.nbytes[m.outputs[i].tensor];
    }
    if (!tail) captured_nbytes_ = end;
  }
  outputs_nbytes_ = end;
  if (captured_nbytes_ > 0) static_outputs_ = Storage::allocate(device, captured_nbytes_, s);
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    bool captured = tail_writes.count(m.outputs[i].tensor) == 0;
    out_ptrs.push_back(captured && static_outputs_ ? static_cast<char*>(static_outputs_->ptr()) + output_offsets_[i]
                                                   : nullptr);
  }
  if (plan.arena_nbytes > 0) arena_ = Storage::allocate(device, plan.arena_nbytes, s);
  // Cached blocks may still be in use by work of an earlier stream with the same handle; the
  // replays run on other streams, so wait for all work once.
  cuda::device_synchronize(device.index);

  cuda::stream_begin_capture(s);
  try {
    g.execute(static_input_ptrs_.data(), out_ptrs.data(), arena_ ? arena_->ptr() : nullptr, s, plan, 0,
              static_cast<int64_t>(tail_begin_));
  } catch (...) {
    try {  // end the (invalidated) capture, so the stream can be destroyed
      void* broken = cuda::stream_end_capture(s);
      if (broken) cuda::graph_destroy(broken);
    } catch (...) {
    }
    throw;
  }
  cu_graph_ = cuda::stream_end_capture(s);
  try {
    exec_ = cuda::graph_instantiate(cu_graph_);
    done_event_ = cuda::event_create(device.index, false);
  } catch (...) {
    destroy_quietly(exec_, cu_graph_, nullptr);
    throw;
  }
}

CudaGraph::~CudaGraph() {
  try {
    cuda::event_synchronize(done_event_);  // the static buffers go back to the pool below
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hidet: waiting for a CUDA graph of %s: %s\n", graph_->source().c_str(), e.what());
  }
  destroy_quietly(exec_, cu_graph_, done_event_);
}

void CudaGraph::run(const void* const* inputs, int32_t num_inputs, void* const* outputs, int32_t num_outputs,
                    void* stream) {
  graph_->check_buffers(inputs, num_inputs, outputs, num_outputs, *plan_);
  cuda::set_device(graph_->device().index);
  std::lock_guard<std::mutex> lock(mutex_);
  launch_locked(inputs, stream);
  copy_outputs_locked(outputs, stream);
}

void CudaGraph::launch(const void* const* inputs, int32_t num_inputs, void* stream) {
  graph_->check_inputs(inputs, num_inputs, *plan_);
  cuda::set_device(graph_->device().index);
  std::lock_guard<std::mutex> lock(mutex_);
  launch_locked(inputs, stream);
}

void CudaGraph::copy_outputs(void* const* outputs, int32_t num_outputs, void* stream) {
  graph_->check_outputs(outputs, num_outputs, *plan_);
  cuda::set_device(graph_->device().index);
  std::lock_guard<std::mutex> lock(mutex_);
  require_launch();
  copy_outputs_locked(outputs, stream);
}

void CudaGraph::launch_locked(const void* const* inputs, void* stream) {
  const artifact::Manifest& m = graph_->manifest();
  // The previous replay (maybe on another stream) must have copied its outputs out before this one
  // overwrites the static buffers. Waiting on a never-recorded event is a no-op.
  cuda::stream_wait_event(stream, done_event_);
  for (size_t i = 0; i < static_inputs_.size(); ++i) {
    cuda::memcpy_async(static_inputs_[i]->ptr(), inputs[i], plan_->nbytes[m.inputs[i].tensor], stream);
  }
  cuda::graph_launch(exec_, stream);
  launched_ = true;
}

void CudaGraph::copy_outputs_block(void* block, void* stream) {
  HIDET_CHECK(block != nullptr || outputs_nbytes_ == 0, "the block to copy the outputs into is NULL");
  cuda::set_device(graph_->device().index);
  std::lock_guard<std::mutex> lock(mutex_);
  require_launch();
  if (captured_nbytes_ > 0) cuda::memcpy_async(block, static_outputs_->ptr(), captured_nbytes_, stream);
  std::vector<void*> outputs;
  for (uint64_t offset : output_offsets_) outputs.push_back(static_cast<char*>(block) + offset);
  run_tail_locked(outputs.data(), stream);
  copies_enqueued(stream);
}

void CudaGraph::copy_outputs_locked(void* const* outputs, void* stream) {
  const artifact::Manifest& m = graph_->manifest();
  for (size_t i = 0; i < output_offsets_.size(); ++i) {
    uint64_t nbytes = plan_->nbytes[m.outputs[i].tensor];
    if (nbytes > 0 && output_offsets_[i] < captured_nbytes_) {
      cuda::memcpy_async(outputs[i], static_cast<char*>(static_outputs_->ptr()) + output_offsets_[i], nbytes, stream);
    }
  }
  run_tail_locked(outputs, stream);
  copies_enqueued(stream);
}

void CudaGraph::run_tail_locked(void* const* outputs, void* stream) {
  if (tail_begin_ == graph_->manifest().instructions.size()) return;
  // (after the copies out: a tail instruction may read an output the captured graph wrote)
  graph_->execute(static_input_ptrs_.data(), outputs, arena_ ? arena_->ptr() : nullptr, stream, *plan_, tail_begin_);
}

void CudaGraph::require_launch() const {
  HIDET_CHECK(launched_, "copy_outputs of a CUDA graph of ", graph_->source(),
              " with no launch before it: call hidet_cuda_graph_launch first");
}

void CudaGraph::copies_enqueued(void* stream) {
  cuda::event_record(done_event_, stream);  // the next launch waits for it
  launched_ = false;
}

}  // namespace hidet
