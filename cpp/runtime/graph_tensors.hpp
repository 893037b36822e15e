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

// The data pointers (byte offsets applied) of the graph's inputs (or outputs) given as DLTensors,
// after checking their number, device, dtype, shape, contiguity and data pointers against the
// manifest; a mismatch throws an Error naming the tensor and what was expected.
std::vector<void*> checked_data(const Graph& g, const DLTensor* tensors, int32_t num, bool outputs);

// A fresh contiguous tensor for output `index`, from the device's pool (stream-ordered on CUDA);
// its deleter returns the memory.
DLManagedTensor* allocate_output(const Graph& g, int32_t index, void* stream);

}  // namespace hidet
