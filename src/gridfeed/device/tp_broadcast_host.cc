#include "gridfeed/device/tp_broadcast.h"

namespace gridfeed::device {

Result<std::vector<std::byte>> TpBroadcast::NewGroupId() {
  return FailedPrecondition("gridfeed was built without CUDA/NCCL: use the host path");
}

Result<std::unique_ptr<TpBroadcast>> TpBroadcast::Create(const std::byte*, size_t, int, int, int,
                                                         size_t) {
  return FailedPrecondition("gridfeed was built without CUDA/NCCL: use the host path");
}

}  // namespace gridfeed::device
