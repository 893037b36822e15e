// hidet._C: the pybind11 face of the C++ runtime. Every binding lives in this directory; the
// Python package wraps these handles thinly (python/hidet/runtime/, python/hidet/graph/tensor.py).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "hidet/runtime.h"
#include "hidet/runtime/cuda_driver.hpp"
#include "hidet/runtime/error.hpp"
#include "hidet/runtime/kernel_library.hpp"
#include "hidet/runtime/memory_pool.hpp"
#include "hidet/runtime/storage.hpp"
#include "hidet/runtime/stream.hpp"

namespace py = pybind11;

namespace hidet {
namespace python {

Device make_device(int kind, int index) {
  HIDET_CHECK(kind == static_cast<int>(DeviceKind::CPU) || kind == static_cast<int>(DeviceKind::CUDA),
              "unknown device kind ", kind, " (expected 1 for cpu or 2 for cuda)");
  return {static_cast<DeviceKind>(kind), index};
}

static void* as_ptr(uintptr_t addr) { return reinterpret_cast<void*>(addr); }
static uintptr_t as_addr(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); }

static py::dict stats_dict(const MemoryStats& s) {
  py::dict d;
  d["allocated"] = s.allocated;
  d["reserved"] = s.reserved;
  d["peak"] = s.peak;
  d["cached"] = s.cached;
  d["num_allocations"] = s.num_allocations;
  d["num_reused"] = s.num_reused;
  return d;
}

static void bind_errors(py::module_& m) {
  static py::exception<Error> runtime_error(m, "HidetRuntimeError", PyExc_RuntimeError);
  static py::exception<OutOfMemoryError> oom_error(m, "OutOfMemoryError", runtime_error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const OutOfMemoryError& e) {
      py::set_error(oom_error, e.what());
    } catch (const Error& e) {
      py::set_error(runtime_error, e.what());
    }
  });
}

static void bind_cuda(py::module_& m) {
  m.def("cuda_available", &cuda::available, "Whether a CUDA driver and at least one GPU are present.");
  m.def("cuda_device_count", &cuda::device_count);
  m.def("cuda_unavailable_reason", []() { return cuda::unavailable_reason(); });
  m.def("cuda_device_synchronize", [](int device) {
    py::gil_scoped_release release;
    cuda::device_synchronize(device);
  });
  m.def("cuda_mem_get_info", [](int device) {
    size_t free_bytes = 0, total_bytes = 0;
    cuda::mem_get_info(device, &free_bytes, &total_bytes);
    return py::make_tuple(free_bytes, total_bytes);
  });
}

static void bind_memory(py::module_& m) {
  py::class_<Storage, std::shared_ptr<Storage>>(m, "Storage",
                                                "A block of device memory released to its owner when unreferenced.")
      .def_static(
          "allocate",
          [](int kind, int index, uint64_t nbytes, uintptr_t stream) {
            return Storage::allocate(make_device(kind, index), nbytes, as_ptr(stream));
          },
          py::arg("kind"), py::arg("index"), py::arg("nbytes"), py::arg("stream") = 0)
      .def_property_readonly("addr", [](const Storage& s) { return as_addr(s.ptr()); })
      .def_property_readonly("nbytes", &Storage::nbytes)
      .def_property_readonly("device_kind", [](const Storage& s) { return static_cast<int>(s.device().kind); })
      .def_property_readonly("device_index", [](const Storage& s) { return s.device().index; });

  m.def("memory_stats", [](int kind, int index) { return stats_dict(MemoryPool::of(make_device(kind, index)).stats()); });
  m.def("empty_cache", [](int kind, int index) { MemoryPool::of(make_device(kind, index)).empty_cache(); });
  m.def("reset_peak_memory", [](int kind, int index) { MemoryPool::of(make_device(kind, index)).reset_peak(); });
  m.def("set_memory_limit",
        [](int kind, int index, uint64_t limit) { MemoryPool::of(make_device(kind, index)).set_limit(limit); });
  m.def(
      "copy_bytes",
      [](uintptr_t dst, int dst_kind, int dst_index, uintptr_t src, int src_kind, int src_index, uint64_t nbytes,
         uintptr_t stream) {
        py::gil_scoped_release release;
        copy_bytes(as_ptr(dst), make_device(dst_kind, dst_index), as_ptr(src), make_device(src_kind, src_index),
                   nbytes, as_ptr(stream));
      },
      py::arg("dst"), py::arg("dst_kind"), py::arg("dst_index"), py::arg("src"), py::arg("src_kind"),
      py::arg("src_index"), py::arg("nbytes"), py::arg("stream") = 0,
      "Copy bytes between devices; enqueued on `stream` when CUDA memory is involved.");
}

static void bind_streams(py::module_& m) {
  py::class_<Stream>(m, "Stream")
      .def_static("create", &Stream::create, py::arg("device"))
      .def_static(
          "borrow", [](uintptr_t handle, int device) { return Stream::borrow(as_ptr(handle), device); },
          py::arg("handle"), py::arg("device"))
      .def_property_readonly("handle", [](const Stream& s) { return as_addr(s.handle()); })
      .def_property_readonly("device", &Stream::device)
      .def("synchronize", [](const Stream& s) {
        py::gil_scoped_release release;
        s.synchronize();
      });
  py::class_<Event>(m, "Event")
      .def(py::init<int, bool>(), py::arg("device"), py::arg("enable_timing"))
      .def("record", &Event::record, py::arg("stream"))
      .def("synchronize",
           [](const Event& e) {
             py::gil_scoped_release release;
             e.synchronize();
           })
      .def("elapsed_ms", &Event::elapsed_ms, py::arg("end"))
      .def_property_readonly("handle", [](const Event& e) { return as_addr(e.handle()); });
}

static void bind_kernels(py::module_& m) {
  py::class_<KernelLibrary, std::shared_ptr<KernelLibrary>>(m, "KernelLibrary")
      .def_static("load", &KernelLibrary::load, py::arg("path"))
      .def("get_kernel", &KernelLibrary::get_kernel, py::arg("name"))
      .def("has_kernel", &KernelLibrary::has_kernel, py::arg("name"))
      .def_property_readonly("path", &KernelLibrary::path);
  py::class_<Kernel>(m, "Kernel")
      .def_property_readonly("name", &Kernel::name)
      .def(
          "launch",
          [](const Kernel& k, const std::vector<uintptr_t>& buffers, const std::vector<int64_t>& dims,
             uintptr_t stream) {
            std::vector<void*> ptrs;
            ptrs.reserve(buffers.size());
            for (uintptr_t b : buffers) ptrs.push_back(as_ptr(b));
            py::gil_scoped_release release;
            k.launch(ptrs, dims, as_ptr(stream));
          },
          py::arg("buffers"), py::arg("dims"), py::arg("stream") = 0,
          "Launch through the uniform kernel ABI: buffer addresses, symbolic-dimension values, a stream.");
}

}  // namespace python
}  // namespace hidet

PYBIND11_MODULE(_C, m) {
  m.doc() = "hidet C++ runtime bindings";
  m.attr("RUNTIME_ABI_VERSION") = hidet_runtime_abi_version();
  m.attr("KERNEL_ABI_VERSION") = HIDET_KERNEL_ABI_VERSION;
  hidet::python::bind_errors(m);
  hidet::python::bind_cuda(m);
  hidet::python::bind_memory(m);
  hidet::python::bind_streams(m);
  hidet::python::bind_kernels(m);
  hidet::python::bind_dlpack(m);
}
