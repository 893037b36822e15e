// Symbol visibility of the C++ API. libhidet_runtime.so is built with hidden visibility so that
// only the C API (runtime.h) and the classes and functions marked here are exported: the pybind11
// module and the C++ tests link against them. Marking the error classes also gives them one
// type_info across shared objects, so exceptions are caught by type everywhere.
#pragma once

#define HIDET_CXX_API __attribute__((visibility("default")))
