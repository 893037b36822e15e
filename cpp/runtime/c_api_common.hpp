// Shared by the C API's source files (c_api.cpp, graph_c_api.cpp): the thread's last error and the
// macros that keep every exception from crossing the C boundary. Internal to libhidet_runtime.so.
#pragma once

#include <exception>
#include <string>

#include "hidet/runtime.h"
#include "hidet/runtime/error.hpp"

namespace hidet {
namespace c_api {
// The message hidet_get_last_error() returns on this thread (defined in c_api.cpp).
extern thread_local std::string last_error;
}  // namespace c_api
}  // namespace hidet

// Wrap a function body: exceptions become -1 (or -2 for out of memory) and the thread's last error.
#define API_BEGIN() try {
#define API_END()                                                          \
  }                                                                        \
  catch (const hidet::OutOfMemoryError& e) {                               \
    hidet::c_api::last_error = e.what();                                   \
    return HIDET_ERROR_OUT_OF_MEMORY;                                      \
  }                                                                        \
  catch (const std::exception& e) {                                        \
    hidet::c_api::last_error = e.what();                                   \
    return HIDET_ERROR;                                                    \
  }                                                                        \
  catch (...) {                                                            \
    hidet::c_api::last_error = "unknown error (non-standard C++ exception)"; \
    return HIDET_ERROR;                                                    \
  }                                                                        \
  return 0;

// An error naming the function and the NULL argument.
#define CHECK_NOT_NULL(arg) HIDET_CHECK((arg) != nullptr, __func__, ": argument '" #arg "' is NULL")
