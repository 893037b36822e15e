// Devices: the CPU and CUDA GPUs, with DLPack's device-type codes.
#pragma once

#include <cstdint>
#include <string>

namespace hidet {

enum class DeviceKind : int32_t { CPU = 1, CUDA = 2 };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int32_t index = 0;

  static Device cpu() { return {DeviceKind::CPU, 0}; }
  static Device cuda(int32_t index) { return {DeviceKind::CUDA, index}; }

  bool is_cpu() const { return kind == DeviceKind::CPU; }
  bool is_cuda() const { return kind == DeviceKind::CUDA; }
  // "cpu" or "cuda:N"
  std::string str() const { return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index); }

  bool operator==(const Device& other) const { return kind == other.kind && index == other.index; }
  bool operator!=(const Device& other) const { return !(*this == other); }
};

}  // namespace hidet
