// DLPack tensors in and out of a Graph (graph_tensors.cpp). Internal to libhidet_runtime.so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph.hpp"
#include "hidet/dlpack.h"

namespace hidet {

// The DLDataType of one of hidet's dtype names ("float16" -> {kDLFloat, 16, 1}).
DLDataType dl_dtype(const std::string& dtype);

// The values of the graph's symbolic dimensions read from the inputs' shapes: each symbol must be,
// by itself, a dimension of some input (e.g. 'batch' of [batch, 3, 224, 224]); inputs that disagree
// are an error naming both. Empty for a static graph.
std::vector<int64_t> bind_symbols(const Graph& g, const DLTensor* inputs, int32_t num);

// The data pointers (byte offsets applied) of the graph's inputs (or outputs) given as DLTensors,
// after checking their number, device, dtype, shape (the manifest's at these symbol values),
// contiguity and data pointers; a mismatch throws an Error naming the tensor and what was expected.
std::vector<void*> checked_data(const Graph& g, const DLTensor* tensors, int32_t num, bool outputs,
                                const std::vector<int64_t>& symbols = {});

// A fresh contiguous tensor for output `index` at these symbol values, from the device's pool
// (stream-ordered on CUDA); its deleter returns the memory.
DLManagedTensor* allocate_output(const Graph& g, int32_t index, void* stream, const std::vector<int64_t>& symbols = {});

}  // namespace hidet
