/*
 * A C program using hidet's runtime with no Python: report the devices, and allocate, copy and
 * free through a device's caching pool. Build against an installed hidet:
 *
 *   HIDET=$(python -m hidet --include-dir)/..
 *   cc runtime_info.c -I $HIDET/include -L $HIDET/lib -lhidet_runtime -Wl,-rpath,$HIDET/lib -o runtime_info
 *   ./runtime_info [cpu|cuda]
 */
#include <hidet/runtime.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                   \
  do {                                                                \
    if ((call) != 0) {                                                \
      fprintf(stderr, "%s failed: %s\n", #call, hidet_get_last_error()); \
      return 1;                                                       \
    }                                                                 \
  } while (0)

int main(int argc, char** argv) {
  int32_t count = 0;
  CHECK(hidet_cuda_device_count(&count));
  printf("hidet runtime C API v%d; CUDA devices: %d", hidet_runtime_abi_version(), count);
  if (count == 0) printf(" (%s)", hidet_cuda_unavailable_reason());
  printf("\n");

  DLDevice device = {kDLCPU, 0};
  if (argc > 1 && strcmp(argv[1], "cuda") == 0) device.device_type = kDLCUDA;

  float host_in[256], host_out[256];
  for (int i = 0; i < 256; ++i) host_in[i] = (float)i * 0.5f;
  void* buffer = NULL;
  CHECK(hidet_alloc(device, sizeof(host_in), NULL, &buffer));
  CHECK(hidet_memcpy(buffer, host_in, sizeof(host_in), NULL));
  CHECK(hidet_memcpy(host_out, buffer, sizeof(host_out), NULL));
  if (device.device_type == kDLCUDA) CHECK(hidet_stream_synchronize(NULL));
  CHECK(hidet_free(device, buffer));
  for (int i = 0; i < 256; ++i) {
    if (host_out[i] != host_in[i]) {
      fprintf(stderr, "round trip mismatch at %d\n", i);
      return 1;
    }
  }
  HidetMemoryStats stats;
  CHECK(hidet_memory_stats(device, &stats));
  printf("round trip through %s memory: ok; pool: allocated %llu B, cached %llu B, reserved %llu B\n",
         device.device_type == kDLCUDA ? "cuda:0" : "cpu", (unsigned long long)stats.allocated,
         (unsigned long long)stats.cached, (unsigned long long)stats.reserved);
  return 0;
}
