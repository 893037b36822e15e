// hidet._C: the pybind11 face of the runtime's C API. Every binding lives in this directory; the
// Python package wraps these handles thinly (python/hidet/runtime/, python/hidet/graph/tensor.py).
// Calls that may block release the GIL and raise only after taking it back.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "hidet/runtime.h"

namespace py = pybind11;

namespace hidet {
namespace python {

static PyObject* runtime_error_type = nullptr;
static PyObject* oom_error_type = nullptr;

void check(int status) {
  if (status == 0) return;
  PyErr_SetString(status == HIDET_ERROR_OUT_OF_MEMORY ? oom_error_type : runtime_error_type, hidet_get_last_error());
  throw py::error_already_set();
}

DLDevice make_device(int kind, int index) {
  if (kind != kDLCPU && kind != kDLCUDA) {
    PyErr_SetString(PyExc_ValueError, ("unknown device kind " + std::to_string(kind) +
                                       " (expected 1 for cpu or 2 for cuda)").c_str());
    throw py::error_already_set();
  }
  return DLDevice{kind, index};
}

// Run a C API call without the GIL, then raise its error (with the GIL) if it failed.
template <typename F>
void call_nogil(F&& f) {
  int status;
  {
    py::gil_scoped_release release;
    status = f();
  }
  check(status);
}

static void* as_ptr(uintptr_t addr) { return reinterpret_cast<void*>(addr); }
static uintptr_t as_addr(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); }

// A CUDA stream: owned (created here, destroyed with the object) or borrowed (e.g. torch's).
struct Stream {
  void* handle;
  int device;
  bool owned;
  ~Stream() {
    if (owned) hidet_stream_destroy(handle);
  }
};

struct Event {
  HidetEventHandle handle = nullptr;
  ~Event() {
    if (handle) hidet_event_destroy(handle);
  }
};

struct KernelLibrary {
  HidetKernelLibraryHandle handle = nullptr;
  std::string path;
  ~KernelLibrary() {
    if (handle) hidet_library_free(handle);
  }
};

struct Kernel {
  HidetKernelHandle handle = nullptr;
  std::string name;
  ~Kernel() {
    if (handle) hidet_kernel_free(handle);
  }
};

static void bind_errors(py::module_& m) {
  runtime_error_type = PyErr_NewExceptionWithDoc("hidet._C.HidetRuntimeError", "An error of the hidet runtime.",
                                                 PyExc_RuntimeError, nullptr);
  oom_error_type = PyErr_NewExceptionWithDoc("hidet._C.OutOfMemoryError",
                                             "A device (or its pool's limit) could not serve an allocation.",
                                             runtime_error_type, nullptr);
  m.attr("HidetRuntimeError") = py::reinterpret_borrow<py::object>(runtime_error_type);
  m.attr("OutOfMemoryError") = py::reinterpret_borrow<py::object>(oom_error_type);
}

static void bind_cuda(py::module_& m) {
  m.def("cuda_device_count", []() {
    int32_t count = 0;
    check(hidet_cuda_device_count(&count));
    return count;
  });
  m.def("cuda_available", []() {
    int32_t count = 0;
    return hidet_cuda_device_count(&count) == 0 && count > 0;
  }, "Whether a CUDA driver and at least one GPU are present.");
  m.def("fnv1a64", [](uintptr_t data, uint64_t nbytes) {
    uint64_t h;
    {
      py::gil_scoped_release release;
      h = hidet_fnv1a64(as_ptr(data), nbytes);
    }
    return h;
  }, "FNV-1a 64-bit hash of host memory (the artifact checksum)");
  m.def("cuda_unavailable_reason", []() { return std::string(hidet_cuda_unavailable_reason()); });
  m.def("cuda_device_synchronize", [](int device) { call_nogil([&] { return hidet_cuda_device_synchronize(device); }); });
  m.def("cuda_mem_get_info", [](int device) {
    uint64_t free_bytes = 0, total_bytes = 0;
    check(hidet_cuda_mem_get_info(device, &free_bytes, &total_bytes));
    return py::make_tuple(free_bytes, total_bytes);
  });
}

static void bind_memory(py::module_& m) {
  py::class_<Storage, std::shared_ptr<Storage>>(m, "Storage",
                                                "A block of device memory released to its owner when unreferenced.")
      .def_static(
          "allocate",
          [](int kind, int index, uint64_t nbytes, uintptr_t stream) {
            DLDevice device = make_device(kind, index);
            void* ptr = nullptr;
            check(hidet_alloc(device, nbytes, as_ptr(stream), &ptr));
            return std::make_shared<Storage>(device, ptr, nbytes, [device, ptr]() { hidet_free(device, ptr); });
          },
          py::arg("kind"), py::arg("index"), py::arg("nbytes"), py::arg("stream") = 0)
      .def_property_readonly("addr", [](const Storage& s) { return as_addr(s.ptr); })
      .def_property_readonly("nbytes", [](const Storage& s) { return s.nbytes; })
      .def_property_readonly("device_kind", [](const Storage& s) { return s.device.device_type; })
      .def_property_readonly("device_index", [](const Storage& s) { return s.device.device_id; });

  m.def("memory_stats", [](int kind, int index) {
    HidetMemoryStats s{};
    check(hidet_memory_stats(make_device(kind, index), &s));
    py::dict d;
    d["allocated"] = s.allocated;
    d["reserved"] = s.reserved;
    d["peak"] = s.peak;
    d["cached"] = s.cached;
    d["num_allocations"] = s.num_allocations;
    d["num_reused"] = s.num_reused;
    return d;
  });
  m.def("empty_cache", [](int kind, int index) { check(hidet_empty_cache(make_device(kind, index))); });
  m.def("reset_peak_memory", [](int kind, int index) { check(hidet_reset_peak_memory(make_device(kind, index))); });
  m.def("set_memory_limit",
        [](int kind, int index, uint64_t limit) { check(hidet_set_memory_limit(make_device(kind, index), limit)); });
  m.def(
      "memcpy",
      [](uintptr_t dst, uintptr_t src, uint64_t nbytes, uintptr_t stream) {
        call_nogil([&] { return hidet_memcpy(as_ptr(dst), as_ptr(src), nbytes, as_ptr(stream)); });
      },
      py::arg("dst"), py::arg("src"), py::arg("nbytes"), py::arg("stream") = 0,
      "Copy bytes between host and/or CUDA memory; enqueued on `stream` when CUDA memory is involved.");
}

static void bind_streams(py::module_& m) {
  py::class_<Stream, std::shared_ptr<Stream>>(m, "Stream")
      .def_static(
          "create",
          [](int device) {
            void* handle = nullptr;
            check(hidet_stream_create(device, &handle));
            return std::shared_ptr<Stream>(new Stream{handle, device, true});
          },
          py::arg("device"))
      .def_static(
          "borrow",
          [](uintptr_t handle, int device) { return std::shared_ptr<Stream>(new Stream{as_ptr(handle), device, false}); },
          py::arg("handle"), py::arg("device"))
      .def_property_readonly("handle", [](const Stream& s) { return as_addr(s.handle); })
      .def_property_readonly("device", [](const Stream& s) { return s.device; })
      .def("synchronize", [](const Stream& s) { call_nogil([&] { return hidet_stream_synchronize(s.handle); }); });
  py::class_<Event, std::shared_ptr<Event>>(m, "Event")
      .def(py::init([](int device, bool enable_timing) {
             auto e = std::make_shared<Event>();
             check(hidet_event_create(device, enable_timing ? 1 : 0, &e->handle));
             return e;
           }),
           py::arg("device"), py::arg("enable_timing"))
      .def("record", [](const Event& e, const Stream& s) { check(hidet_event_record(e.handle, s.handle)); },
           py::arg("stream"))
      .def("synchronize", [](const Event& e) { call_nogil([&] { return hidet_event_synchronize(e.handle); }); })
      .def(
          "elapsed_ms",
          [](const Event& start, const Event& end) {
            float ms = 0;
            check(hidet_event_elapsed_ms(start.handle, end.handle, &ms));
            return ms;
          },
          py::arg("end"))
      .def_property_readonly("handle", [](const Event& e) { return as_addr(e.handle); });
}

static void bind_kernels(py::module_& m) {
  py::class_<KernelLibrary, std::shared_ptr<KernelLibrary>>(m, "KernelLibrary")
      .def_static(
          "load",
          [](const std::string& path) {
            auto lib = std::make_shared<KernelLibrary>();
            lib->path = path;
            check(hidet_library_load(path.c_str(), &lib->handle));
            return lib;
          },
          py::arg("path"))
      .def(
          "get_kernel",
          [](const KernelLibrary& lib, const std::string& name) {
            auto k = std::make_shared<Kernel>();
            k->name = name;
            check(hidet_library_get_kernel(lib.handle, name.c_str(), &k->handle));
            return k;
          },
          py::arg("name"))
      .def(
          "has_kernel",
          [](const KernelLibrary& lib, const std::string& name) {
            int32_t has = 0;
            check(hidet_library_has_kernel(lib.handle, name.c_str(), &has));
            return has != 0;
          },
          py::arg("name"))
      .def_property_readonly("path", [](const KernelLibrary& lib) { return lib.path; });
  py::class_<Kernel, std::shared_ptr<Kernel>>(m, "Kernel")
      .def_property_readonly("name", [](const Kernel& k) { return k.name; })
      .def_property_readonly("signature",
                             [](const Kernel& k) {
                               const char* text = nullptr;
                               check(hidet_kernel_signature(k.handle, &text));
                               return std::string(text);
                             })
      .def(
          "launch",
          [](const Kernel& k, const std::vector<uintptr_t>& buffers, const std::vector<int64_t>& dims,
             uintptr_t stream) {
            std::vector<void*> ptrs;
            ptrs.reserve(buffers.size());
            for (uintptr_t b : buffers) ptrs.push_back(as_ptr(b));
            call_nogil([&] {
              return hidet_kernel_launch(k.handle, ptrs.data(), static_cast<int32_t>(ptrs.size()), dims.data(),
                                         static_cast<int32_t>(dims.size()), as_ptr(stream));
            });
          },
          py::arg("buffers"), py::arg("dims"), py::arg("stream") = 0,
          "Launch through the uniform kernel ABI: buffer addresses, symbolic-dimension values, a stream.")
      .def(
          "time",
          [](const Kernel& k, const std::vector<uintptr_t>& buffers, const std::vector<int64_t>& dims, int device,
             int calls, int repeat) {
            std::vector<void*> ptrs;
            ptrs.reserve(buffers.size());
            for (uintptr_t b : buffers) ptrs.push_back(as_ptr(b));
            float ms = 0.0f;
            call_nogil([&] {
              return hidet_kernel_time(k.handle, ptrs.data(), static_cast<int32_t>(ptrs.size()), dims.data(),
                                       static_cast<int32_t>(dims.size()), device, calls, repeat, &ms);
            });
            return ms;
          },
          py::arg("buffers"), py::arg("dims"), py::arg("device"), py::arg("calls") = 20, py::arg("repeat") = 5,
          "Median milliseconds per launch from CUDA-graph replays of `calls` launches (hidet_kernel_time).");
}

}  // namespace python
}  // namespace hidet

PYBIND11_MODULE(_C, m) {
  m.doc() = "hidet runtime bindings (over the C API of libhidet_runtime.so)";
  if (hidet_runtime_abi_version() != HIDET_RUNTIME_ABI_VERSION) {
    throw std::runtime_error("libhidet_runtime.so has C API version " + std::to_string(hidet_runtime_abi_version()) +
                             ", this module was built for " + std::to_string(HIDET_RUNTIME_ABI_VERSION) +
                             "; reinstall hidet");
  }
  m.attr("RUNTIME_ABI_VERSION") = HIDET_RUNTIME_ABI_VERSION;
  m.attr("KERNEL_ABI_VERSION") = HIDET_KERNEL_ABI_VERSION;
  hidet::python::bind_errors(m);
  hidet::python::bind_cuda(m);
  hidet::python::bind_memory(m);
  hidet::python::bind_streams(m);
  hidet::python::bind_kernels(m);
  hidet::python::bind_dlpack(m);
  hidet::python::bind_graph(m);
}
