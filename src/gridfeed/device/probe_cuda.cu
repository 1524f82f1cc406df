#include <cuda_runtime.h>

#include <string>

#include "gridfeed/core/build_config.h"
#include "gridfeed/device/probe.h"
#if GRIDFEED_HAS_NCCL
#include <nccl.h>
#endif

namespace gridfeed::device {
namespace {

__global__ void AddOne(int* value) { *value += 1; }

bool KernelRoundTrip() {
  int* d = nullptr;
  if (cudaMalloc(&d, sizeof(int)) != cudaSuccess) return false;
  int h = 41;
  bool ok = cudaMemcpy(d, &h, sizeof(int), cudaMemcpyHostToDevice) == cudaSuccess;
  if (ok) {
    AddOne<<<1, 1>>>(d);
    ok = cudaGetLastError() == cudaSuccess &&
         cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess && h == 42;
  }
  cudaFree(d);
  return ok;
}

}  // namespace

DeviceProbe Probe() {
  DeviceProbe p;
  p.compiled_with_cuda = true;
  p.compiled_with_nccl = GRIDFEED_HAS_NCCL != 0;
  int count = 0;  // left untouched by the runtime when there is no driver
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    p.device_count = 0;
    p.cuda_status = cudaGetErrorString(err);
  } else {
    p.device_count = count;
    p.cuda_status = "ok";
    if (count > 0) p.kernel_ok = KernelRoundTrip();
  }
#if GRIDFEED_HAS_NCCL
  int v = 0;
  if (ncclGetVersion(&v) == ncclSuccess) {
    p.nccl_version = std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
                     std::to_string(v % 100);
  }
#endif
  return p;
}

}  // namespace gridfeed::device
