// Serve a compiled model with no Python: load a .hidet artifact, run it on inputs from files (or
// random data), check the outputs against expected ones saved next to it, and print the latency.
//
//   python -c "import hidet.torch; hidet.torch.compile_to_file(model, [x], 'model.hidet')"
//   run_model model.hidet                 # reads model.hidet.example/{input,output}_<i>.bin if present
//   run_model model.hidet --random --repeat 100 [--cuda-graph] [--device 0]
//   run_model dynamic.hidet --dim batch=4 --inputs DIR   # a graph with symbolic dimensions, at batch 4
//   run_model model.hidet --sha256 $(sha256sum model.hidet | cut -c1-64)   # load only that exact file
//
// Input and output files hold a tensor's raw contiguous bytes in its dtype (what compile_to_file's
// example writes). Exit status: 0 when the run (and the check, if any) succeeded, 1 otherwise.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hidet/runtime.hpp"

namespace {

struct Args {
  std::string model, inputs_dir;
  std::string sha256;  // --sha256 HEX: load the model only if its SHA-256 is this (docs/runtime.md, "Trust")
  std::vector<std::pair<std::string, int64_t>> dims;  // --dim name=value: values of symbolic dimensions
  bool random = false, cuda_graph = false;
  int device = 0, warmup = 3, repeat = 20;
  double rtol = -1, atol = -1;  // < 0: by dtype
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "%s\nusage: run_model MODEL.hidet [--inputs DIR | --random] [--repeat N] [--warmup N] "
               "[--cuda-graph] [--device N] [--rtol R] [--atol A] [--dim NAME=VALUE ...] [--sha256 HEX]\n",
               why);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value of " + s).c_str());
      return argv[++i];
    };
    if (s == "--inputs") a.inputs_dir = value();
    else if (s == "--random") a.random = true;
    else if (s == "--sha256") a.sha256 = value();
    else if (s == "--cuda-graph") a.cuda_graph = true;
    else if (s == "--device") a.device = std::atoi(value().c_str());
    else if (s == "--warmup") a.warmup = std::atoi(value().c_str());
    else if (s == "--repeat") a.repeat = std::max(1, std::atoi(value().c_str()));
    else if (s == "--rtol") a.rtol = std::atof(value().c_str());
    else if (s == "--atol") a.atol = std::atof(value().c_str());
    else if (s == "--dim") {
      std::string v = value();
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0) usage(("--dim takes NAME=VALUE, got " + v).c_str());
      a.dims.emplace_back(v.substr(0, eq), std::atoll(v.c_str() + eq + 1));
    }
    else if (!s.empty() && s[0] == '-') usage(("unknown option " + s).c_str());
    else if (a.model.empty()) a.model = s;
    else usage(("unexpected argument " + s).c_str());
  }
  if (a.model.empty()) usage("no model given");
  if (a.inputs_dir.empty() && !a.random) {
    std::ifstream probe(a.model + ".example/input_0.bin");
    if (probe) a.inputs_dir = a.model + ".example";
    else a.random = true;  // no example beside the model (or it takes no inputs)
  }
  return a;
}

bool read_file(const std::string& path, std::vector<uint8_t>* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

// One element of a tensor of dtype `t` as a double.
double element(const uint8_t* p, DLDataType t, size_t i) {
  auto half_to_float = [](uint16_t h) {
    int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v = exp == 0 ? std::ldexp(mant, -24) : exp == 31 ? (mant ? NAN : INFINITY) : std::ldexp(mant + 1024, exp - 25);
    return sign ? -v : v;
  };
  auto bits_to_float = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  switch (t.code) {
    case kDLFloat:
      if (t.bits == 32) return reinterpret_cast<const float*>(p)[i];
      if (t.bits == 64) return reinterpret_cast<const double*>(p)[i];
      return half_to_float(reinterpret_cast<const uint16_t*>(p)[i]);
    case kDLBfloat: return bits_to_float(uint32_t(reinterpret_cast<const uint16_t*>(p)[i]) << 16);
    case kDLInt:
      if (t.bits == 8) return reinterpret_cast<const int8_t*>(p)[i];
      if (t.bits == 16) return reinterpret_cast<const int16_t*>(p)[i];
      if (t.bits == 32) return reinterpret_cast<const int32_t*>(p)[i];
      return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
    default: return p[i];  // uint8, bool
  }
}

// Random bytes for a tensor: floats uniform in [-1, 1), integers in [0, 10), bools 0/1.
std::vector<uint8_t> random_tensor(const hidet::rt::TensorInfo& info, std::mt19937& gen) {
  DLDataType t = hidet::rt::dtype_from_name(info.dtype);
  size_t n = info.nbytes / ((t.bits + 7) / 8);
  std::vector<uint8_t> bytes(info.nbytes);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 9);
  for (size_t i = 0; i < n; ++i) {
    if (t.code == kDLFloat && t.bits == 32) reinterpret_cast<float*>(bytes.data())[i] = real(gen);
    else if (t.code == kDLFloat && t.bits == 64) reinterpret_cast<double*>(bytes.data())[i] = real(gen);
    else if (t.code == kDLFloat || t.code == kDLBfloat) {
      float f = real(gen);  // to 16 bits by truncation: fine for random data
      uint32_t u;
      std::memcpy(&u, &f, 4);
      uint16_t h;
      if (t.code == kDLBfloat) {
        h = uint16_t(u >> 16);
      } else {
        int exp = int((u >> 23) & 0xff) - 127 + 15;
        h = uint16_t(((u >> 16) & 0x8000) | (exp <= 0 ? 0 : ((exp << 10) | ((u >> 13) & 0x3ff))));
      }
      reinterpret_cast<uint16_t*>(bytes.data())[i] = h;
    } else if (t.code == kDLBool) bytes[i] = uint8_t(small(gen) & 1);
    else if (t.bits == 8) bytes[i] = uint8_t(small(gen));
    else if (t.bits == 16) reinterpret_cast<int16_t*>(bytes.data())[i] = int16_t(small(gen));
    else if (t.bits == 32) reinterpret_cast<int32_t*>(bytes.data())[i] = small(gen);
    else reinterpret_cast<int64_t*>(bytes.data())[i] = small(gen);
  }
  return bytes;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Memory for one tensor on the graph's device, freed at scope exit.
struct Buffer {
  DLDevice device;
  void* ptr = nullptr;
  Buffer(DLDevice d, uint64_t nbytes, const void* init) : device(d) {
    hidet::rt::check(hidet_alloc(d, std::max<uint64_t>(nbytes, 1), nullptr, &ptr));
    if (init != nullptr && nbytes > 0) {
      hidet::rt::check(hidet_memcpy(ptr, init, nbytes, nullptr));
      if (d.device_type == kDLCUDA) hidet::rt::check(hidet_cuda_device_synchronize(d.device_id));
    }
  }
  ~Buffer() { hidet_free(device, ptr); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

int run(const Args& args) {
  hidet::rt::Graph graph(args.model, args.sha256, args.device);
  DLDevice device = graph.device();
  bool cuda = device.device_type == kDLCUDA;
  // Symbolic dimensions: every one needs a value (--dim), and the shapes follow from them.
  std::vector<std::string> symbols = graph.symbols();
  std::vector<int64_t> values;
  std::string at;
  for (const std::string& name : symbols) {
    auto it = std::find_if(args.dims.begin(), args.dims.end(), [&](const auto& d) { return d.first == name; });
    if (it == args.dims.end()) {
      std::string all;
      for (const auto& n : symbols) all += (all.empty() ? "" : ", ") + n;
      throw hidet::rt::Error("the graph has symbolic dimensions (" + all + "): give each a value with --dim " + name +
                             "=N");
    }
    values.push_back(it->second);
    at += (at.empty() ? " at " : ", ") + name + "=" + std::to_string(it->second);
  }
  for (const auto& d : args.dims) {
    if (std::find(symbols.begin(), symbols.end(), d.first) == symbols.end()) {
      throw hidet::rt::Error("--dim " + d.first + ": the graph has no symbolic dimension of that name");
    }
  }
  std::vector<hidet::rt::TensorInfo> in_info = symbols.empty() ? graph.inputs() : graph.inputs_at(values);
  std::vector<hidet::rt::TensorInfo> out_info = symbols.empty() ? graph.outputs() : graph.outputs_at(values);
  std::printf("%s on %s%s: %zu input(s), %zu output(s)\n", args.model.c_str(), cuda ? "cuda" : "cpu", at.c_str(),
              in_info.size(), out_info.size());

  // Inputs: from files or random, copied to the device.
  std::mt19937 gen(0);
  std::vector<std::unique_ptr<Buffer>> inputs, outputs;
  std::vector<DLTensor> in_tensors, out_tensors;
  for (size_t i = 0; i < in_info.size(); ++i) {
    const auto& info = in_info[i];
    std::vector<uint8_t> host;
    if (args.random) {
      host = random_tensor(info, gen);
    } else {
      std::string path = args.inputs_dir + "/input_" + std::to_string(i) + ".bin";
      if (!read_file(path, &host)) throw hidet::rt::Error("cannot read " + path);
      if (host.size() != info.nbytes) {
        throw hidet::rt::Error(path + " holds " + std::to_string(host.size()) + " bytes; input '" + info.name +
                               "' (" + info.dtype + shape_text(info.shape) + ") takes " + std::to_string(info.nbytes));
      }
    }
    inputs.push_back(std::make_unique<Buffer>(device, info.nbytes, host.data()));
    in_tensors.push_back(
        hidet::rt::make_dl_tensor(inputs.back()->ptr, info.shape, hidet::rt::dtype_from_name(info.dtype), device));
    std::printf("  input  %-12s %s%s%s\n", info.name.c_str(), info.dtype.c_str(), shape_text(info.shape).c_str(),
                args.random ? " (random)" : "");
  }
  for (const auto& info : out_info) {
    outputs.push_back(std::make_unique<Buffer>(device, info.nbytes, nullptr));
    out_tensors.push_back(
        hidet::rt::make_dl_tensor(outputs.back()->ptr, info.shape, hidet::rt::dtype_from_name(info.dtype), device));
  }

  HidetStream stream = nullptr;
  if (cuda) hidet::rt::check(hidet_stream_create(device.device_id, &stream));
  std::unique_ptr<hidet::rt::CudaGraph> cuda_graph;
  if (args.cuda_graph) cuda_graph = std::make_unique<hidet::rt::CudaGraph>(graph);
  auto once = [&] {
    if (cuda_graph) cuda_graph->run(in_tensors, out_tensors, stream);
    else graph.run(in_tensors, out_tensors, stream);
  };
  for (int i = 0; i < args.warmup; ++i) once();
  if (cuda) hidet::rt::check(hidet_stream_synchronize(stream));
  std::vector<double> ms;
  for (int i = 0; i < args.repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    once();
    if (cuda) hidet::rt::check(hidet_stream_synchronize(stream));
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("latency: median %.4f ms, min %.4f ms over %d runs%s\n", ms[ms.size() / 2], ms[0], args.repeat,
              args.cuda_graph ? " (CUDA graph replay)" : "");

  // Check against the expected outputs, where given.
  int status = 0;
  for (size_t i = 0; i < out_info.size(); ++i) {
    const auto& info = out_info[i];
    std::vector<uint8_t> got(info.nbytes);
    if (info.nbytes > 0) hidet::rt::check(hidet_memcpy(got.data(), outputs[i]->ptr, info.nbytes, nullptr));
    if (cuda) hidet::rt::check(hidet_cuda_device_synchronize(device.device_id));
    std::printf("  output %-12s %s%s", info.name.c_str(), info.dtype.c_str(), shape_text(info.shape).c_str());
    std::vector<uint8_t> want;
    std::string path = args.inputs_dir + "/output_" + std::to_string(i) + ".bin";
    if (args.random || !read_file(path, &want)) {
      std::printf("\n");
      continue;
    }
    if (want.size() != info.nbytes) {
      std::printf(": %s holds %zu bytes, expected %llu: MISMATCH\n", path.c_str(), want.size(),
                  static_cast<unsigned long long>(info.nbytes));
      status = 1;
      continue;
    }
    DLDataType t = hidet::rt::dtype_from_name(info.dtype);
    bool low = (t.code == kDLFloat && t.bits == 16) || t.code == kDLBfloat;
    bool exact = t.code != kDLFloat && t.code != kDLBfloat;
    double rtol = args.rtol >= 0 ? args.rtol : exact ? 0 : low ? 2e-2 : 1e-4;
    double atol = args.atol >= 0 ? args.atol : exact ? 0 : low ? 2e-2 : 1e-4;
    size_t n = info.nbytes / ((t.bits + 7) / 8), bad = 0;
    double max_err = 0;
    for (size_t k = 0; k < n; ++k) {
      double g = element(got.data(), t, k), w = element(want.data(), t, k);
      double err = std::fabs(g - w);
      if (std::isnan(g) != std::isnan(w)) err = INFINITY;
      if (std::isnan(g) && std::isnan(w)) err = 0;
      max_err = std::max(max_err, err);
      if (err > atol + rtol * std::fabs(w)) ++bad;
    }
    std::printf(": max abs error %.3g, %s\n", max_err, bad ? "MISMATCH" : "matches");
    if (bad) {
      std::printf("    %zu of %zu elements differ by more than atol %g + rtol %g * |expected|\n", bad, n, atol, rtol);
      status = 1;
    }
  }
  if (!args.random) std::printf(status == 0 ? "all outputs match\n" : "outputs differ\n");
  cuda_graph.reset();
  if (stream != nullptr) hidet_stream_destroy(stream);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse(argc, argv);
  try {
    return run(args);
  } catch (const hidet::rt::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
