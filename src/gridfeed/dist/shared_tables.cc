#include "gridfeed/dist/shared_tables.h"

#include <chrono>
#include <cstring>

#include "gridfeed/dist/agree.h"

namespace gridfeed::dist {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

Result<std::unique_ptr<SharedTables>> SharedTables::BuildAndDistribute(const Grid& grid,
                                                                       const BuildFn& build,
                                                                       DistributeTimes* times) {
  std::unique_ptr<SharedTables> st(new SharedTables());
  MPI_Comm world = grid.world();
  auto t0 = Clock::now();
  // 1. Rank 0 builds; everyone learns the outcome from a fixed header first.
  std::vector<std::byte> image;
  Status built;
  uint64_t header[2] = {0, 0};  // size, digest
  if (grid.world_rank() == 0) {
    auto r = build();
    if (r.ok()) {
      image = std::move(r).value();
      header[0] = image.size();
      header[1] = order::TableImageDigest(image);
    } else {
      built = r.status().WithContext("rank 0 (table build)");
    }
  }
  if (times) times->build_seconds = Since(t0);
  t0 = Clock::now();
  GRIDFEED_RETURN_IF_ERROR(BroadcastStatus(world, 0, built));
  GRIDFEED_RETURN_IF_ERROR(
      MpiStatus(MPI_Bcast(header, 2, MPI_UINT64_T, 0, world), "MPI_Bcast(table header)"));
  st->digest_ = header[1];

  // 2. The image goes to the readers: one shared window per node.
  Status local;
  if (grid.is_reader()) {
    int reader_rank = 0;
    MPI_Comm_rank(grid.reader_comm(), &reader_rank);
    MPI_Comm_split_type(grid.reader_comm(), MPI_COMM_TYPE_SHARED, reader_rank, MPI_INFO_NULL,
                        &st->node_comm_);
    int node_rank = 0;
    MPI_Comm_rank(st->node_comm_, &node_rank);
    MPI_Comm_size(st->node_comm_, &st->readers_on_node_);
    MPI_Comm_split(grid.reader_comm(), node_rank == 0 ? 0 : MPI_UNDEFINED, reader_rank,
                   &st->leaders_comm_);
    const MPI_Aint size = node_rank == 0 ? static_cast<MPI_Aint>(header[0]) : 0;
    std::byte* base = nullptr;
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    int rc = MPI_Win_allocate_shared(std::max<MPI_Aint>(size, 1), 1, info, st->node_comm_, &base,
                                     &st->window_);
    MPI_Info_free(&info);
    local = MpiStatus(rc, "MPI_Win_allocate_shared");
    if (local.ok()) {
      MPI_Aint leader_size = 0;
      int disp = 0;
      MPI_Win_shared_query(st->window_, 0, &leader_size, &disp, &base);
      st->node_bytes_ = header[0];
      // World rank 0 is reader 0 and the leader of its node: it fills its own window and
      // broadcasts to the other leaders.
      if (node_rank == 0) {
        if (grid.world_rank() == 0 && !image.empty()) {
          std::memcpy(base, image.data(), image.size());
        }
        std::vector<std::byte>().swap(image);
        local = BroadcastBytes(st->leaders_comm_, 0, std::span<std::byte>(base, header[0]));
      }
      MPI_Barrier(st->node_comm_);  // peers read only after the leader filled the window
      st->image_ = std::span<const std::byte>(base, header[0]);
    }
    // The node's readers share one copy, so its leader's check covers them all (hashing the
    // same memory once per reader would only multiply the cost by the readers per node).
    if (local.ok() && node_rank == 0 && order::TableImageDigest(st->image_) != header[1]) {
      local = DataLoss("table image digest mismatch after broadcast on " + grid.Describe());
    }
    if (local.ok()) {
      auto parsed = order::ParseTableImage(st->image_);
      if (parsed.ok())
        st->tables_ = std::move(parsed).value();
      else
        local = parsed.status();
    }
  }
  GRIDFEED_RETURN_IF_ERROR(AgreeOnStatus(world, local, grid.world_rank()));
  if (times) times->broadcast_seconds = Since(t0);
  return st;
}

SharedTables::~SharedTables() {
  if (window_ != MPI_WIN_NULL) MPI_Win_free(&window_);
  if (leaders_comm_ != MPI_COMM_NULL) MPI_Comm_free(&leaders_comm_);
  if (node_comm_ != MPI_COMM_NULL) MPI_Comm_free(&node_comm_);
}

}  // namespace gridfeed::dist
