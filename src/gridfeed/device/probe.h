// What the device path can use on this machine. Local; thread safe.
#pragma once

#include <string>

namespace gridfeed::device {

struct DeviceProbe {
  bool compiled_with_cuda = false;
  bool compiled_with_nccl = false;
  int device_count = 0;      // 0 when no driver or no GPU
  std::string cuda_status;   // the runtime's answer, e.g. "no driver"
  std::string nccl_version;  // "2.28.3" when compiled with NCCL
  // Runs a one-element kernel round trip on device 0; true only with a working GPU.
  bool kernel_ok = false;
};

// Never fails: without a driver or GPU it reports device_count 0 and why.
DeviceProbe Probe();

}  // namespace gridfeed::device
