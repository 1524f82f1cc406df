#include "gridfeed/device/probe.h"

namespace gridfeed::device {

DeviceProbe Probe() {
  DeviceProbe p;
  p.cuda_status = "not compiled with CUDA";
  return p;
}

}  // namespace gridfeed::device
