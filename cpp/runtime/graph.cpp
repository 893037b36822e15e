// The graph executor (graph.hpp): loading an artifact's kernels and weights, and running its
// instruction list on the caller's stream.
#include "graph.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "hidet/runtime/cuda_driver.hpp"
#include "hidet/runtime/error.hpp"

namespace hidet {
void Graph::load_kernels(const artifact::Container& container) {
  // Shared with every other graph whose artifact holds the same library bytes (library_registry.hpp).
  std::map<std::string, std::shared_ptr<LoadedLibrary>> by_entry;
  for (size_t i = 0; i < manifest_.kernels.size(); ++i) {
    const artifact::KernelSpec& spec = manifest_.kernels[i];
    std::shared_ptr<LoadedLibrary>& lib = by_entry[spec.library];
    if (!lib) {
      const artifact::Entry* entry = container.find(spec.library);  // present: checked by read_manifest
      lib = LibraryRegistry::instance().acquire(entry->data, entry->size, entry->hash,
                                                str_cat("artifact ", source_, ": cannot load kernel library ",
                                                        spec.library, " (of kernel ", i, " '", spec.name, "')"));
      libraries_.push_back(lib);
    }
    std::string why = lib->library().why_not_kernel(spec.function);
    HIDET_CHECK(why.empty(), "artifact ", source_, ": kernel ", i, " ('", spec.name, "'): ", spec.library, " ", why);
    kernels_.push_back(lib->kernel(spec.function));
  }
  // Every instruction against what its kernel declared, before anything runs.
  std::vector<artifact::KernelSignature> signatures;
  for (size_t i = 0; i < kernels_.size(); ++i) {
    signatures.push_back(artifact::read_signature(
        kernels_[i].signature().c_str(), str_cat("artifact ", source_, ": kernel ", i, " ('",
                                                 manifest_.kernels[i].name, "') of ", manifest_.kernels[i].library)));
  }
  declared_ = artifact::bind_kernels(manifest_, signatures, source_);
}

void Graph::load_weights(const artifact::Container& container) {
  if (manifest_.weights_nbytes == 0) return;
  const artifact::Entry* entry = container.find("weights.bin");  // its size was checked
  weights_ = Storage::allocate(device_, manifest_.weights_nbytes);
  copy_bytes(weights_->ptr(), device_, entry->data, Device::cpu(), entry->size, nullptr);
  // The source is the caller's buffer or our mapping: wait until the copy has read it.
  if (device_.is_cuda()) cuda::device_synchronize(device_.index);
}

// sm_XY[a]: the kernels carry SASS for X.Y and PTX, so any device of at least X.Y runs them;
// arch-specific "a" kernels run on exactly X.Y.
static void check_cuda_device(const artifact::Manifest& m, const std::string& source, int32_t device_id) {
  if (!cuda::available()) {
    throw Error(str_cat("artifact ", source, " was built for cuda ", m.arch, " but no CUDA device is available: ",
                        cuda::unavailable_reason()));
  }
  HIDET_CHECK(device_id >= 0 && device_id < cuda::device_count(), "artifact ", source, ": cannot load onto cuda:",
              device_id, ": this machine has ", cuda::device_count(), " CUDA device(s)");
  int want_major = 0, want_minor = 0;
  char suffix = '\0';
  int n = 0;
  int fields = std::sscanf(m.arch.c_str(), "sm_%d%n", &want_major, &n);
  HIDET_CHECK(fields == 1 && want_major >= 10, "artifact ", source, ": unknown cuda arch '", m.arch,
              "' (expected e.g. sm_90)");
  const char* rest = m.arch.c_str() + n;
  HIDET_CHECK(*rest == '\0' || (rest[0] == 'a' && rest[1] == '\0'), "artifact ", source, ": unknown cuda arch '",
              m.arch, "' (expected e.g. sm_90)");
  suffix = *rest;
  want_minor = want_major % 10;
  want_major /= 10;
  int major = 0, minor = 0;
  cuda::compute_capability(device_id, &major, &minor);
  bool ok = suffix == 'a' ? (major == want_major && minor == want_minor)
                          : (major > want_major || (major == want_major && minor >= want_minor));
  HIDET_CHECK(ok, "artifact ", source, " was built for ", m.arch, " but device ", device_id, " is sm_", major, minor);
}

std::shared_ptr<Graph> Graph::load(const artifact::Container& container, int32_t device_id) {
  std::shared_ptr<Graph> g(new Graph());
  g->source_ = container.source();
  g->manifest_ = artifact::read_manifest(container);
  const artifact::Manifest& m = g->manifest_;
  if (m.target == "cuda") {
    check_cuda_device(m, g->source_, device_id);
    g->device_ = Device::cuda(device_id);
  } else {
#if defined(__x86_64__)
    HIDET_CHECK(m.arch == "x86-64", "artifact ", g->source_, " was built for cpu ", m.arch, " but this machine is x86-64");
#endif
    g->device_ = Device::cpu();
  }
  g->load_kernels(container);
  g->load_weights(container);
  if (m.symbolic()) {
    // Arena lifetimes, the same at every size: allocated by the first instruction writing a tensor,
    // released after the last one touching it.
    std::vector<int64_t> first(m.tensors.size(), -1), last(m.tensors.size(), -1);
    for (size_t i = 0; i < m.instructions.size(); ++i) {
      const auto& inst = m.instructions[i];
      for (int32_t t : inst.outputs) {
        if (first[t] < 0) first[t] = static_cast<int64_t>(i);
        last[t] = static_cast<int64_t>(i);
      }
      for (int32_t t : inst.inputs) last[t] = static_cast<int64_t>(i);
    }
    g->arena_allocs_.resize(m.instructions.size());
    g->arena_frees_.resize(m.instructions.size());
    for (size_t i = 0; i < m.instructions.size(); ++i) {
      for (int32_t t : m.instructions[i].outputs) {
        if (m.tensors[t].storage != artifact::StorageKind::Arena || first[t] != static_cast<int64_t>(i)) continue;
        g->arena_allocs_[i].push_back(t);
        g->arena_frees_[last[t]].push_back(t);
      }
    }
  } else {
    auto plan = std::make_shared<Plan>();
    for (const auto& t : m.tensors) {
      plan->offsets.push_back(t.offset);
      plan->nbytes.push_back(t.nbytes);
    }
    plan->arena_nbytes = m.arena_nbytes;
    artifact::check_shapes(m, g->declared_, {}, g->source_);
    g->static_plan_ = std::move(plan);
  }
  return g;
}

namespace {

constexpr uint64_t kArenaAlign = artifact::kArenaAlignment;

uint64_t arena_size(uint64_t nbytes) { return std::max(kArenaAlign, (nbytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign); }

// First fit over coalesced free ranges (hidet/drivers/build_graph.py MemoryPlanner, in C++).
class ArenaPlanner {
 public:
  uint64_t allocate(uint64_t nbytes) {
    uint64_t size = arena_size(nbytes);
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].second < size) continue;
      uint64_t offset = free_[i].first;
      if (free_[i].second > size) {
        free_[i] = {offset + size, free_[i].second - size};
      } else {
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
      }
      return offset;
    }
    uint64_t offset = end_;
    if (!free_.empty() && free_.back().first + free_.back().second == end_) {  // grow the trailing free range
      offset = free_.back().first;
      free_.pop_back();
    }
    end_ = offset + size;
    return offset;
  }
  void release(uint64_t offset, uint64_t nbytes) {
    free_.push_back({offset, arena_size(nbytes)});
    std::sort(free_.begin(), free_.end());
    std::vector<std::pair<uint64_t, uint64_t>> merged;
    for (const auto& f : free_) {
      if (!merged.empty() && merged.back().first + merged.back().second == f.first) merged.back().second += f.second;
      else merged.push_back(f);
    }
    free_ = std::move(merged);
  }
  uint64_t end() const { return end_; }

 private:
  std::vector<std::pair<uint64_t, uint64_t>> free_;  // (offset, size), sorted
  uint64_t end_ = 0;
};

constexpr size_t kMaxPlans = 64;  // distinct symbol values whose plans are kept

}  // namespace

std::shared_ptr<const Graph::Plan> Graph::plan(const std::vector<int64_t>& symbols) {
  const auto& m = manifest_;
  if (!m.symbolic()) {
    HIDET_CHECK(symbols.empty(), "the graph has no symbolic dimensions, got ", symbols.size(), " value(s)");
    return static_plan_;
  }
  HIDET_CHECK(symbols.size() == m.symbols.size(), "the graph has ", m.symbols.size(), " symbolic dimension(s) (",
              [&] {
                std::string s;
                for (const auto& n : m.symbols) s += (s.empty() ? "" : ", ") + n;
                return s;
              }(),
              "), got ", symbols.size(), " value(s); give their values (hidet_graph_run_dims), or run on ",
              "tensors (hidet_graph_run_tensors), whose shapes give them");
  for (size_t i = 0; i < symbols.size(); ++i) {
    HIDET_CHECK(symbols[i] >= 0, "symbol '", m.symbols[i], "' = ", symbols[i], " is negative");
  }
  {
    std::lock_guard<std::mutex> lock(plans_mutex_);
    auto it = plans_.find(symbols);
    if (it != plans_.end()) return it->second;
  }
  artifact::check_shapes(m, declared_, symbols, source_);  // once per distinct values: the plan is kept
  auto plan = std::make_shared<Plan>();
  plan->symbols = symbols;
  plan->offsets.assign(m.tensors.size(), 0);
  for (const auto& t : m.tensors) plan->nbytes.push_back(t.nbytes_at(symbols));
  ArenaPlanner planner;
  for (size_t i = 0; i < m.instructions.size(); ++i) {
    for (int32_t t : arena_allocs_[i]) plan->offsets[t] = planner.allocate(plan->nbytes[t]);
    for (int32_t t : arena_frees_[i]) planner.release(plan->offsets[t], plan->nbytes[t]);
  }
  plan->arena_nbytes = planner.end();
  std::lock_guard<std::mutex> lock(plans_mutex_);
  if (plans_.size() >= kMaxPlans) plans_.clear();
  plans_[symbols] = plan;
  return plan;
}

Graph::~Graph() {
  if (device_.is_cuda()) {
    try {
      cuda::device_synchronize(device_.index);  // kernels still running may read weights or arenas
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hidet: freeing a graph of %s: %s\n", source_.c_str(), e.what());
    }
  }
}

std::string Graph::where(size_t i) const {
  const artifact::Instruction& inst = manifest_.instructions[i];
  if (inst.kernel < 0) return str_cat("artifact ", source_, ": instruction ", i, " (copy)");
  return str_cat("artifact ", source_, ": instruction ", i, " (kernel '", manifest_.kernels[inst.kernel].name, "')");
}

namespace {

std::string io_names(const std::vector<artifact::IoSpec>& list) {
  std::string s;
  for (const auto& io : list) s += (s.empty() ? "" : ", ") + io.name;
  return s;
}

}  // namespace

void Graph::check_inputs(const void* const* inputs, int32_t num_inputs, const Plan& plan) const {
  const auto& m = manifest_;
  HIDET_CHECK(num_inputs == static_cast<int32_t>(m.inputs.size()), "the graph takes ", m.inputs.size(),
              " input(s) (", io_names(m.inputs), "), got ", num_inputs);
  HIDET_CHECK(inputs != nullptr || num_inputs == 0, "the array of inputs is NULL");
  // A NULL pointer is fine for an empty tensor (torch gives empty tensors no memory).
  for (int32_t i = 0; i < num_inputs; ++i) {
    HIDET_CHECK(inputs[i] != nullptr || plan.nbytes[m.inputs[i].tensor] == 0, "input ", i, " ('",
                m.inputs[i].name, "'): null pointer");
  }
}

void Graph::check_outputs(void* const* outputs, int32_t num_outputs, const Plan& plan) const {
  const auto& m = manifest_;
  HIDET_CHECK(num_outputs == static_cast<int32_t>(m.outputs.size()), "the graph has ", m.outputs.size(),
              " output(s) (", io_names(m.outputs), "), got ", num_outputs);
  HIDET_CHECK(outputs != nullptr || num_outputs == 0, "the array of outputs is NULL");
  for (int32_t i = 0; i < num_outputs; ++i) {
    HIDET_CHECK(outputs[i] != nullptr || plan.nbytes[m.outputs[i].tensor] == 0, "output ", i, " ('",
                m.outputs[i].name, "'): null pointer");
  }
}

void Graph::check_buffers(const void* const* inputs, int32_t num_inputs, void* const* outputs,
                          int32_t num_outputs, const Plan& plan) const {
  check_inputs(inputs, num_inputs, plan);
  check_outputs(outputs, num_outputs, plan);
}

void Graph::execute(const void* const* inputs, void* const* outputs, void* arena, void* stream, const Plan& plan,
                    size_t begin, int64_t end) const {
  const auto& m = manifest_;
  std::vector<void*> addrs(m.tensors.size(), nullptr);
  for (size_t i = 0; i < m.inputs.size(); ++i) addrs[m.inputs[i].tensor] = const_cast<void*>(inputs[i]);
  for (size_t i = 0; i < m.outputs.size(); ++i) addrs[m.outputs[i].tensor] = outputs[i];
  for (size_t t = 0; t < m.tensors.size(); ++t) {
    const artifact::TensorSpec& spec = m.tensors[t];
    if (spec.storage == artifact::StorageKind::Weight && weights_) {
      addrs[t] = static_cast<uint8_t*>(weights_->ptr()) + spec.offset;
    } else if (spec.storage == artifact::StorageKind::Arena && arena != nullptr) {
      addrs[t] = static_cast<uint8_t*>(arena) + plan.offsets[t];
    }
  }
  std::vector<void*> buffers;
  std::vector<int64_t> dims;
  const size_t stop = end < 0 ? m.instructions.size() : static_cast<size_t>(end);
  for (size_t i = begin; i < stop; ++i) {
    const artifact::Instruction& inst = m.instructions[i];
    try {
      if (inst.kernel < 0) {
        uint64_t nbytes = plan.nbytes[inst.inputs[0]];
        copy_bytes(addrs[inst.outputs[0]], device_, addrs[inst.inputs[0]], device_, nbytes, stream);
        continue;
      }
      buffers.clear();
      for (int32_t t : inst.inputs) buffers.push_back(addrs[t]);
      for (int32_t t : inst.outputs) buffers.push_back(addrs[t]);
      // an instruction with an empty output does not run (the builder leaves static ones out)
      bool empty = false;
      for (int32_t t : inst.outputs) empty = empty || plan.nbytes[t] == 0;
      if (empty && m.symbolic()) continue;
      dims.clear();
      for (int32_t d : inst.dims) dims.push_back(plan.symbols[d]);
      kernels_[inst.kernel].launch(buffers.data(), static_cast<int32_t>(buffers.size()),
                                   dims.empty() ? nullptr : dims.data(), static_cast<int32_t>(dims.size()), stream);
    } catch (const std::exception& e) {
      throw Error(str_cat(where(i), ": ", e.what()));
    }
  }
}

Graph::Arena& Graph::cuda_arena(void* stream) {
  std::lock_guard<std::mutex> lock(arenas_mutex_);
  std::unique_ptr<Arena>& arena = cuda_arenas_[stream];
  if (!arena) arena = std::make_unique<Arena>();
  return *arena;
}

void Graph::run(const void* const* inputs, int32_t num_inputs, void* const* outputs, int32_t num_outputs,
                void* stream, const std::vector<int64_t>& symbols) {
  std::shared_ptr<const Plan> p = plan(symbols);
  check_buffers(inputs, num_inputs, outputs, num_outputs, *p);
  uint64_t need = p->arena_nbytes;
  if (device_.is_cuda()) {
    cuda::set_device(device_.index);  // kernels launch into the current context
    Arena& arena = cuda_arena(stream);
    std::lock_guard<std::mutex> lock(arena.mutex);
    // Keyed by the stream in the pool as well: its blocks are reused only by work on this stream, so
    // replacing a too-small arena is ordered after the work that used it.
    if (need > 0 && (!arena.storage || arena.storage->nbytes() < need)) {
      arena.storage.reset();
      arena.storage = Storage::allocate(device_, need, stream);
    }
    execute(inputs, outputs, arena.storage ? arena.storage->ptr() : nullptr, stream, *p);
    return;
  }
  // CPU: take an idle arena large enough (or a new one) for the duration of this synchronous run.
  std::shared_ptr<Storage> arena;
  if (need > 0) {
    {
      std::lock_guard<std::mutex> lock(arenas_mutex_);
      for (size_t i = 0; i < cpu_free_arenas_.size(); ++i) {
        if (cpu_free_arenas_[i]->nbytes() >= need) {
          arena = std::move(cpu_free_arenas_[i]);
          cpu_free_arenas_.erase(cpu_free_arenas_.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        }
      }
    }
    if (!arena) arena = Storage::allocate(device_, need);
  }
  struct GiveBack {  // returns the arena even when a kernel fails
    Graph* g;
    std::shared_ptr<Storage>& arena;
    ~GiveBack() {
      if (!arena) return;
      std::lock_guard<std::mutex> lock(g->arenas_mutex_);
      g->cpu_free_arenas_.push_back(std::move(arena));
      if (g->cpu_free_arenas_.size() > 8) g->cpu_free_arenas_.erase(g->cpu_free_arenas_.begin());  // oldest
    }
  } give_back{this, arena};
  execute(inputs, outputs, arena ? arena->ptr() : nullptr, stream, *p);
}

}  // namespace hidet
