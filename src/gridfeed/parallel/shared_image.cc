#include "gridfeed/parallel/shared_image.h"

#include <cstring>
#include <exception>
#include <string>

#include "gridfeed/core/stopwatch.h"
#include "gridfeed/parallel/agree.h"

namespace gridfeed::parallel {

Result<std::unique_ptr<SharedImage>> SharedImage::Distribute(const Grid& grid,
                                                             const MakeProducer& make,
                                                             Digest digest, DistributeTimes* times,
                                                             const NodeSplit& nodes) {
  std::unique_ptr<SharedImage> st(new SharedImage());
  MPI_Comm world = grid.world();
  Stopwatch watch;
  // 1. Rank 0 builds; everyone learns the outcome from a fixed header first.
  ImageProducer producer;
  Status built;
  uint64_t header[2] = {0, 0};  // image size, digest (the digest follows the image)
  if (grid.world_rank() == 0) {
    auto r = make();
    if (r.ok()) {
      producer = std::move(r).value();
      header[0] = producer.size;
    } else {
      built = r.status().WithContext("rank 0 (table build)");
    }
  }
  double write_seconds = 0;  // rank 0 writes the image into its window during step 2
  const double build_seconds = watch.Lap();
  // The others wait here for the build without polling (every rank, whatever the outcome).
  GRIDFEED_RETURN_IF_ERROR(SleepyBarrier(world));
  GRIDFEED_RETURN_IF_ERROR(BroadcastStatus(world, 0, built));
  GRIDFEED_RETURN_IF_ERROR(
      MpiStatus(MPI_Bcast(header, 1, MPI_UINT64_T, 0, world), "MPI_Bcast(table header)"));

  // 2. The image goes to the readers: one shared window per node. World rank 0 (reader 0,
  // leader of its node) writes it straight into its window, freeing the tables as it goes.
  Status local;
  int num_nodes = 0;  // known on the leaders; world rank 0 (a leader) tells everyone below
  if (grid.is_reader()) {
    int reader_rank = 0;
    MPI_Comm_rank(grid.reader_comm(), &reader_rank);
    // The splits are collective over the readers: all made, their failures agreed.
    Status split;
    if (nodes.ranks_per_node > 0) {
      split = MpiStatus(MPI_Comm_split(grid.reader_comm(), grid.world_rank() / nodes.ranks_per_node,
                                       reader_rank, &st->node_comm_),
                        "MPI_Comm_split(node)");
    } else {
      split = MpiStatus(MPI_Comm_split_type(grid.reader_comm(), MPI_COMM_TYPE_SHARED, reader_rank,
                                            MPI_INFO_NULL, &st->node_comm_),
                        "MPI_Comm_split_type(node)");
    }
    split = AgreeOnStatus(grid.reader_comm(), split, grid.world_rank());
    if (!split.ok()) {
      // The readers agree; the other ranks learn it in the world agreement they wait in.
      GRIDFEED_RETURN_IF_ERROR(AgreeOnStatus(world, split, grid.world_rank()));
    }
    int node_rank = 0;
    MPI_Comm_rank(st->node_comm_, &node_rank);
    MPI_Comm_size(st->node_comm_, &st->readers_on_node_);
    split = MpiStatus(MPI_Comm_split(grid.reader_comm(), node_rank == 0 ? 0 : MPI_UNDEFINED,
                                     reader_rank, &st->leaders_comm_),
                      "MPI_Comm_split(leaders)");
    split = AgreeOnStatus(grid.reader_comm(), split, grid.world_rank());
    if (!split.ok()) GRIDFEED_RETURN_IF_ERROR(AgreeOnStatus(world, split, grid.world_rank()));
    const MPI_Aint size = node_rank == 0 ? static_cast<MPI_Aint>(header[0]) : 0;
    std::byte* base = nullptr;
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    int rc = MPI_Win_allocate_shared(std::max<MPI_Aint>(size, 1), 1, info, st->node_comm_, &base,
                                     &st->window_);
    MPI_Info_free(&info);
    // A node whose window failed must not leave the other leaders in the broadcast below.
    local = AgreeOnStatus(grid.reader_comm(), MpiStatus(rc, "MPI_Win_allocate_shared"),
                          grid.world_rank());
    if (local.ok()) {
      MPI_Aint leader_size = 0;
      int disp = 0;
      // The leader's segment: a failure anywhere is agreed before anyone touches `base`.
      local =
          AgreeOnStatus(grid.reader_comm(),
                        MpiStatus(MPI_Win_shared_query(st->window_, 0, &leader_size, &disp, &base),
                                  "MPI_Win_shared_query"),
                        grid.world_rank());
    }
    if (local.ok()) {
      st->node_bytes_ = header[0];
      if (node_rank == 0) {
        int node = 0;
        MPI_Comm_rank(st->leaders_comm_, &node);
        MPI_Comm_size(st->leaders_comm_, &num_nodes);
        if (nodes.ranks_per_node > 0) node = grid.world_rank() / nodes.ranks_per_node;
        if (grid.world_rank() == 0) {
          Stopwatch write;
          producer.write(base);
          producer = ImageProducer();  // frees what the producer still holds
          write_seconds = write.Seconds();
          header[1] = digest(std::span<const std::byte>(base, header[0]));
        }
        local = BroadcastBytes(st->leaders_comm_, 0, std::span<std::byte>(base, header[0]));
        if (local.ok()) {
          local = MpiStatus(MPI_Bcast(&header[1], 1, MPI_UINT64_T, 0, st->leaders_comm_),
                            "MPI_Bcast(table digest)");
        }
        if (local.ok() && node == nodes.corrupt_node && header[0] > 0) {
          base[header[0] / 2] ^= std::byte{0xff};  // injected by a test
        }
        // The node's readers share this copy, so its leader's check covers them all.
        if (local.ok() && digest(std::span<const std::byte>(base, header[0])) != header[1]) {
          local = DataLoss("image digest mismatch after the broadcast on node " +
                           std::to_string(node) + " (leader " + grid.Describe() + ")");
        }
        // What each node's window serves, for reports (on every leader, whatever happened).
        if (grid.world_rank() == 0) st->readers_per_node_.assign(num_nodes, 0);
        const Status gathered =
            MpiStatus(MPI_Gather(&st->readers_on_node_, 1, MPI_INT, st->readers_per_node_.data(), 1,
                                 MPI_INT, 0, st->leaders_comm_),
                      "MPI_Gather(readers per node)");
        if (local.ok()) local = gathered;
      }
      // Peers read only after the leader filled the window (they sleep while it writes).
      const Status filled = SleepyBarrier(st->node_comm_);
      if (local.ok()) local = filled;
      const Status told = MpiStatus(MPI_Bcast(&header[1], 1, MPI_UINT64_T, 0, st->node_comm_),
                                    "MPI_Bcast(node digest)");
      if (local.ok()) local = told;
      st->digest_ = header[1];
      st->bytes_ = std::span<const std::byte>(base, header[0]);
    }
  }
  GRIDFEED_RETURN_IF_ERROR(AgreeOnStatus(world, local, grid.world_rank()));
  GRIDFEED_RETURN_IF_ERROR(
      MpiStatus(MPI_Bcast(&num_nodes, 1, MPI_INT, 0, world), "MPI_Bcast(node count)"));
  st->num_nodes_ = num_nodes;
  if (times) {
    times->build_seconds = build_seconds + write_seconds;
    times->broadcast_seconds = watch.Lap() - write_seconds;
  }
  return st;
}

SharedImage::~SharedImage() {
  // MPI_Win_free waits for the node's other readers: a rank unwinding alone (an exception) must
  // not, it leaves the window to the job's end instead.
  if (std::uncaught_exceptions() > 0) return;
  if (window_ != MPI_WIN_NULL) MPI_Win_free(&window_);
  if (leaders_comm_ != MPI_COMM_NULL) MPI_Comm_free(&leaders_comm_);
  if (node_comm_ != MPI_COMM_NULL) MPI_Comm_free(&node_comm_);
}

}  // namespace gridfeed::parallel
