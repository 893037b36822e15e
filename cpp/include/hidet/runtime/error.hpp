// Errors of the C++ runtime. They cross into Python as exceptions (hidet.runtime.HidetRuntimeError,
// hidet.runtime.OutOfMemoryError) and into C as -1 plus hidet_get_last_error().
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

#include "hidet/runtime/export.hpp"

namespace hidet {

class HIDET_CXX_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// An allocation could not be served; the message names the request and the pool's state.
class HIDET_CXX_API OutOfMemoryError : public Error {
 public:
  explicit OutOfMemoryError(const std::string& msg) : Error(msg) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append(os, rest...);
}
}  // namespace detail

// Concatenate the arguments with operator<< into one string.
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  detail::append(os, args...);
  return os.str();
}

}  // namespace hidet

// Throw hidet::Error with the streamed message when `cond` is false.
#define HIDET_CHECK(cond, ...)                            \
  do {                                                    \
    if (!(cond)) throw ::hidet::Error(::hidet::str_cat(__VA_ARGS__)); \
  } while (0)
