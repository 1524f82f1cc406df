#include <cstring>
#include <string>
#include <utility>

#include "gridfeed/device/tp_broadcast.h"

namespace gridfeed::device {
namespace {

// TP rank 0 stages the payload in host_buffer(), Broadcast "uploads" it into the stand-in
// device buffer and the caller's mover carries that buffer to the other TP ranks: the same
// sequence of calls as the CUDA + NCCL path, in host memory.
class LoopbackTpBroadcast final : public TpBroadcast {
 public:
  LoopbackTpBroadcast(int tp_rank, size_t max_bytes, ByteMover move)
      : rank_(tp_rank), max_bytes_(max_bytes), move_(std::move(move)), device_(max_bytes) {
    if (tp_rank == 0) host_.resize(max_bytes);
  }

  std::byte* host_buffer() override { return rank_ == 0 ? host_.data() : nullptr; }

  Status Broadcast(size_t bytes) override {
    if (bytes > max_bytes_) return InvalidArgument("payload larger than the device buffer");
    if (rank_ == 0 && bytes > 0) std::memcpy(device_.data(), host_.data(), bytes);
    return move_(device_.data(), bytes);
  }

  void* device_buffer() override { return device_.data(); }

  Status CopyToHost(size_t bytes, std::byte* out) override {
    if (bytes > max_bytes_) return InvalidArgument("copy larger than the device buffer");
    if (bytes > 0) std::memcpy(out, device_.data(), bytes);
    return Status::Ok();
  }

 private:
  int rank_;
  size_t max_bytes_;
  ByteMover move_;
  std::vector<std::byte> host_, device_;
};

}  // namespace

std::unique_ptr<TpBroadcast> TpBroadcast::CreateLoopback(int tp_rank, size_t max_bytes,
                                                         ByteMover move) {
  return std::make_unique<LoopbackTpBroadcast>(tp_rank, max_bytes, std::move(move));
}

}  // namespace gridfeed::device
