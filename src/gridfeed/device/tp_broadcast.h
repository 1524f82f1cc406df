// Device path of the TP broadcast: TP rank 0 copies a micro-batch payload from pinned host
// memory to its GPU asynchronously, then NCCL broadcasts it inside the TP group, so every TP
// rank ends with the payload in device memory. One header, two implementations: CUDA + NCCL
// (tp_broadcast_cuda.cu) and a host twin (tp_broadcast_host.cc) whose NewGroupId/Create report
// kFailedPrecondition, so callers keep the MPI host path on machines without a GPU.
// CreateLoopback (tp_broadcast_loopback.cc, in every build) is a working twin for tests: its
// "device" buffer is host memory and the caller's mover carries the bytes, so the caller's
// device code path runs without a GPU (device/ sees no MPI).
// Not thread safe; the NCCL calls are collective on the TP group.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::device {

// Bytes of an NCCL unique id (NCCL_UNIQUE_ID_BYTES), the size every rank expects.
inline constexpr size_t kGroupIdBytes = 128;

// Collective on the TP group: makes the `bytes` bytes at `data` on TP rank 0 arrive at `data`
// on every TP rank (the caller's transport, e.g. an MPI broadcast).
using ByteMover = std::function<Status(std::byte* data, size_t bytes)>;

class TpBroadcast {
 public:
  virtual ~TpBroadcast() = default;

  // A new NCCL unique id (on TP rank 0); the caller sends its bytes to the other TP ranks.
  static Result<std::vector<std::byte>> NewGroupId();
  // Collective on the TP group: joins the NCCL group `group_id` as `tp_rank` of `tp_size` on
  // CUDA device `device`, with buffers for payloads of up to `max_bytes`.
  // (Pointer + size rather than std::span: this header is also compiled by nvcc as C++17.)
  static Result<std::unique_ptr<TpBroadcast>> Create(const std::byte* group_id,
                                                     size_t group_id_bytes, int tp_rank,
                                                     int tp_size, int device, size_t max_bytes);
  // The loopback twin (tests, no GPU needed): host_buffer() on rank 0 only, as on the device
  // path; Broadcast copies it into device_buffer() (host memory) and calls `move` on that.
  static std::unique_ptr<TpBroadcast> CreateLoopback(int tp_rank, size_t max_bytes, ByteMover move);

  // Pinned host staging buffer of max_bytes: TP rank 0 writes the payload here.
  virtual std::byte* host_buffer() = 0;
  // Collective on the TP group: rank 0's first `bytes` of host_buffer() arrive in every
  // rank's device_buffer(). Returns after the data is on the device.
  virtual Status Broadcast(size_t bytes) = 0;
  virtual void* device_buffer() = 0;
  // Copies the first `bytes` of device_buffer() to host memory at `out` (checks and tests; a
  // device-to-host copy on the CUDA path). Local.
  virtual Status CopyToHost(size_t bytes, std::byte* out) = 0;
};

}  // namespace gridfeed::device
