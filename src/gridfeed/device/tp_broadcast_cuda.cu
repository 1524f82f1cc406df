#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <string>

#include "gridfeed/device/tp_broadcast.h"

namespace gridfeed::device {
namespace {

static_assert(NCCL_UNIQUE_ID_BYTES == kGroupIdBytes, "callers size group ids by kGroupIdBytes");

Status Cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Status(StatusCode::kFailedPrecondition, std::string(what) + ": " + cudaGetErrorString(e));
}

Status Nccl(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return Status::Ok();
  return Status(StatusCode::kAborted, std::string(what) + ": " + ncclGetErrorString(r));
}

class CudaTpBroadcast final : public TpBroadcast {
 public:
  ~CudaTpBroadcast() override {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (device_ != nullptr) cudaFree(device_);
    if (host_ != nullptr) cudaFreeHost(host_);
  }

  Status Init(const std::byte* id_bytes, size_t id_size, int rank, int size, int device,
              size_t max_bytes) {
    ncclUniqueId id;
    if (id_size != sizeof(id.internal)) {
      return InvalidArgument("NCCL group id has " + std::to_string(id_size) + " bytes, expected " +
                             std::to_string(sizeof(id.internal)));
    }
    std::memcpy(id.internal, id_bytes, sizeof(id.internal));
    rank_ = rank;
    max_bytes_ = max_bytes;
    GRIDFEED_RETURN_IF_ERROR(Cuda(cudaSetDevice(device), "cudaSetDevice"));
    GRIDFEED_RETURN_IF_ERROR(
        Cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    GRIDFEED_RETURN_IF_ERROR(
        Cuda(cudaMalloc(&device_, std::max<size_t>(max_bytes, 1)), "cudaMalloc"));
    if (rank == 0) {
      GRIDFEED_RETURN_IF_ERROR(
          Cuda(cudaHostAlloc(&host_, std::max<size_t>(max_bytes, 1), cudaHostAllocDefault),
               "cudaHostAlloc"));
    }
    return Nccl(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
  }

  std::byte* host_buffer() override { return static_cast<std::byte*>(host_); }

  Status Broadcast(size_t bytes) override {
    if (bytes > max_bytes_) return InvalidArgument("payload larger than the device buffer");
    if (rank_ == 0) {
      GRIDFEED_RETURN_IF_ERROR(
          Cuda(cudaMemcpyAsync(device_, host_, bytes, cudaMemcpyHostToDevice, stream_),
               "cudaMemcpyAsync"));
    }
    // The copy and the broadcast are ordered on the same stream.
    GRIDFEED_RETURN_IF_ERROR(Nccl(
        ncclBroadcast(device_, device_, bytes, ncclUint8, 0, comm_, stream_), "ncclBroadcast"));
    return Cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  void* device_buffer() override { return device_; }

  Status CopyToHost(size_t bytes, std::byte* out) override {
    if (bytes > max_bytes_) return InvalidArgument("copy larger than the device buffer");
    GRIDFEED_RETURN_IF_ERROR(
        Cuda(cudaMemcpyAsync(out, device_, bytes, cudaMemcpyDeviceToHost, stream_),
             "cudaMemcpyAsync(device to host)"));
    return Cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

 private:
  int rank_ = 0;
  size_t max_bytes_ = 0;
  void* host_ = nullptr;
  void* device_ = nullptr;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

Result<std::vector<std::byte>> TpBroadcast::NewGroupId() {
  ncclUniqueId id;
  GRIDFEED_RETURN_IF_ERROR(Nccl(ncclGetUniqueId(&id), "ncclGetUniqueId"));
  std::vector<std::byte> out(sizeof(id.internal));
  std::memcpy(out.data(), id.internal, sizeof(id.internal));
  return out;
}

Result<std::unique_ptr<TpBroadcast>> TpBroadcast::Create(const std::byte* group_id,
                                                         size_t group_id_bytes, int tp_rank,
                                                         int tp_size, int device,
                                                         size_t max_bytes) {
  auto b = std::make_unique<CudaTpBroadcast>();
  GRIDFEED_RETURN_IF_ERROR(b->Init(group_id, group_id_bytes, tp_rank, tp_size, device, max_bytes));
  return std::unique_ptr<TpBroadcast>(std::move(b));
}

}  // namespace gridfeed::device
