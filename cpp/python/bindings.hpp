// Shared declarations of the binding files in this directory.
#pragma once

#include <pybind11/pybind11.h>

#include "hidet/runtime/device.hpp"

namespace hidet {
namespace python {

// A Device from Python's (kind, index) pair, kind being DLPack's code (1 cpu, 2 cuda).
Device make_device(int kind, int index);

void bind_dlpack(pybind11::module_& m);

}  // namespace python
}  // namespace hidet
