// The graph executor: a loaded artifact (kernels loaded, weights on the device) run instruction by
// instruction on the caller's stream. Internal to libhidet_runtime.so; C callers use the
// hidet_graph_* functions of runtime.h.
//
// Thread safety: run() may be called from several threads at once. Intermediates live in an arena
// of manifest().arena_nbytes bytes (symbolic graphs: of the size their plan for the run's symbol
// values needs; an arena too small for a run is replaced by a larger one):
//  - CUDA: one arena per stream, created on the first run on that stream and kept until the graph
//    is destroyed. Work on one stream is ordered, so successive runs on a stream may share its
//    arena; runs on two streams never share one. Host threads that enqueue on the same stream at
//    the same time are serialized while they enqueue.
//  - CPU: runs are synchronous; each concurrent run takes an arena of its own from a free list.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "artifact.hpp"
#include "hidet/runtime/device.hpp"
#include "hidet/runtime/kernel_library.hpp"
#include "hidet/runtime/storage.hpp"
#include "kernel_contract.hpp"
#include "library_registry.hpp"

namespace hidet {

class Graph {
 public:
  // Load a checked container onto a device: CPU artifacts ignore `device_id`; CUDA artifacts need
  // a device at least as new as the artifact's arch. The container may be dropped afterwards.
  static std::shared_ptr<Graph> load(const artifact::Container& container, int32_t device_id);
  ~Graph();  // waits for the device (CUDA) before memory goes back to the pool
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const artifact::Manifest& manifest() const { return manifest_; }
  Device device() const { return device_; }
  const std::string& source() const { return source_; }

  // Where the tensors of one set of symbol values live: arena offsets and sizes (static graphs: the
  // manifest's; symbolic ones: planned first-fit over the tensors' lifetimes, as the Python builder
  // plans static graphs).
  struct Plan {
    std::vector<int64_t> symbols;
    std::vector<uint64_t> offsets, nbytes;  // by tensor id (offsets: arena tensors)
    uint64_t arena_nbytes = 0;
  };

  // Check the caller's buffers (counts, NULL pointers of non-empty tensors), then enqueue every
  // instruction on `stream` (CPU: run them now). `symbols`: the values of the graph's symbolic
  // dimensions, in the order of manifest().symbols (empty for a static graph).
  void run(const void* const* inputs, int32_t num_inputs, void* const* outputs, int32_t num_outputs, void* stream,
           const std::vector<int64_t>& symbols = {});
  void check_buffers(const void* const* inputs, int32_t num_inputs, void* const* outputs, int32_t num_outputs,
                     const Plan& plan) const;
  void check_inputs(const void* const* inputs, int32_t num_inputs, const Plan& plan) const;
  void check_outputs(void* const* outputs, int32_t num_outputs, const Plan& plan) const;

  // The plan for these symbol values (checked: count, not negative), cached per distinct values.
  std::shared_ptr<const Plan> plan(const std::vector<int64_t>& symbols);

  // Enqueue the instructions [begin, end) (end < 0: to the last) with the given input/output/arena addresses
  // (no checks, no locks): the building block of run() and of CUDA graph capture.
  void execute(const void* const* inputs, void* const* outputs, void* arena, void* stream, const Plan& plan,
               size_t begin = 0, int64_t end = -1) const;
  const Plan& static_plan() const { return *static_plan_; }

 private:
  struct Arena {
    std::shared_ptr<Storage> storage;  // nullptr when arena_nbytes is 0
    std::mutex mutex;                  // held while a run enqueues its work with this arena
  };
  Graph() = default;
  void load_kernels(const artifact::Container& container);
  void load_weights(const artifact::Container& container);
  Arena& cuda_arena(void* stream);
  std::string where(size_t instruction) const;  // "artifact g.hidet: instruction 2 (kernel 'matmul')"

  std::string source_;
  artifact::Manifest manifest_;
  Device device_;
  // Libraries before kernels: kernels are destroyed first. (Each kernel holds its library too.)
  std::vector<std::shared_ptr<LoadedLibrary>> libraries_;
  std::vector<Kernel> kernels_;  // by manifest kernel index
  artifact::DeclaredShapes declared_;  // per instruction, the shapes its kernel declared (kernel_contract.hpp)
  std::shared_ptr<Storage> weights_;
  std::mutex arenas_mutex_;
  std::map<void*, std::unique_ptr<Arena>> cuda_arenas_;      // by stream
  std::vector<std::shared_ptr<Storage>> cpu_free_arenas_;  // idle CPU arenas
  std::shared_ptr<const Plan> static_plan_;                 // the manifest's own layout (static graphs)
  // symbolic graphs: per instruction, the arena tensors it allocates and those released after it
  std::vector<std::vector<int32_t>> arena_allocs_, arena_frees_;
  std::mutex plans_mutex_;
  std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans_;  // by symbol values (bounded)
};

// A CUDA graph captured from a Graph: static input, output and arena buffers, captured once on a
// private stream. run() copies the caller's inputs into the static inputs, replays the graph and
// copies the static outputs into the caller's outputs, all on the caller's stream; the next run
// (on any stream) waits for the previous one's copies, so results are never overwritten and runs
// on several streams or threads are safe (they are serialized on the device).
class CudaGraph {
 public:
  // Captured at `symbols` (the values of the graph's symbolic dimensions, manifest order; empty for a
  // static graph): one shape per CUDA graph. Throws for a CPU graph.
  explicit CudaGraph(std::shared_ptr<Graph> graph, const std::vector<int64_t>& symbols = {});
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void run(const void* const* inputs, int32_t num_inputs, void* const* outputs, int32_t num_outputs, void* stream);
  // run() in two halves (hidet_cuda_graph_launch): inputs in and the replay, then the copies out.
  void launch(const void* const* inputs, int32_t num_inputs, void* stream);
  void copy_outputs(void* const* outputs, int32_t num_outputs, void* stream);
  // copy_outputs in one copy: the whole block of static outputs into `block` (output_offsets() in it).
  void copy_outputs_block(void* block, void* stream);
  const Graph& graph() const { return *graph_; }
  const std::vector<int64_t>& symbols() const { return plan_->symbols; }
  // Where each output sits in the static outputs' block, and the block's size (copy_outputs_block).
  const std::vector<uint64_t>& output_offsets() const { return output_offsets_; }
  uint64_t outputs_nbytes() const { return outputs_nbytes_; }
  // The instructions after the captured graph (tail_begin() onwards): see tail_start in cuda_graph.cpp.
  size_t tail_begin() const { return tail_begin_; }
  static constexpr uint64_t kOutputAlign = 256;

 private:
  std::shared_ptr<Graph> graph_;  // kept alive: its kernels and weights are in the captured graph
  std::shared_ptr<const Graph::Plan> plan_;  // the layout (and sizes) of the captured shape
  std::vector<std::shared_ptr<Storage>> static_inputs_;
  std::vector<const void*> static_input_ptrs_;  // their addresses (the capture's and the tail's inputs)
  std::shared_ptr<Storage> static_outputs_;  // one block: output i at output_offsets_[i]
  std::vector<uint64_t> output_offsets_;
  uint64_t outputs_nbytes_ = 0;
  size_t tail_begin_ = 0;          // instructions from here on run after the replay, into the caller's outputs
  uint64_t captured_nbytes_ = 0;   // the block's first bytes: the outputs the captured graph writes
  void run_tail_locked(void* const* outputs, void* stream);
  std::shared_ptr<Storage> arena_;
  void* cu_graph_ = nullptr;
  void* exec_ = nullptr;
  void* done_event_ = nullptr;  // recorded after each run's copies out
  bool launched_ = false;       // a launch whose outputs are not copied out yet
  std::mutex mutex_;

  void launch_locked(const void* const* inputs, void* stream);
  void copy_outputs_locked(void* const* outputs, void* stream);
  void require_launch() const;          // (under mutex_) a launch is waiting for its copies out
  void copies_enqueued(void* stream);   // (under mutex_) after the copies out of a launch
};

}  // namespace hidet
