// The index tables of a job, built once on world rank 0 and handed out over MPI: a fixed
// header first ({status, message, size, digest}) to every rank, then the table image to the
// reader ranks only. On each node one copy lives in an MPI shared-memory window: the node's
// first reader (its leader) receives it, the other readers map it, so table memory per node
// does not grow with the ranks per node; the leader checks the image's digest (its peers map
// the very same memory). No file is written.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/dist/grid.h"
#include "gridfeed/order/table_image.h"

namespace gridfeed::dist {

struct DistributeTimes {
  double build_seconds = 0;      // rank 0's build + serialisation
  double broadcast_seconds = 0;  // header + image to the node leaders, digest checks
};

class SharedTables {
 public:
  // Builds the tables and returns the writer of their image (world rank 0 only).
  using BuildFn = std::function<Result<std::unique_ptr<order::TableImageWriter>>()>;

  // Collective on grid.world(). `build` runs on world rank 0 only. Every rank returns the
  // same status: rank 0's build error ("rank 0: ..."), or a digest/parse failure on any reader.
  static Result<std::unique_ptr<SharedTables>> BuildAndDistribute(const Grid& grid,
                                                                  const BuildFn& build,
                                                                  DistributeTimes* times);
  // Frees the window: collective over the readers of the node (all readers destroy together).
  ~SharedTables();

  // Empty on non-readers.
  std::span<const std::byte> image() const { return image_; }
  // Views into image(); splits are empty on non-readers.
  const order::TableImage& tables() const { return tables_; }
  uint64_t digest() const { return digest_; }
  // Bytes of table memory this node holds for the job (the window; 0 off the readers).
  size_t node_bytes() const { return node_bytes_; }
  int readers_on_node() const { return readers_on_node_; }

 private:
  SharedTables() = default;
  MPI_Comm node_comm_ = MPI_COMM_NULL;
  MPI_Comm leaders_comm_ = MPI_COMM_NULL;
  MPI_Win window_ = MPI_WIN_NULL;
  std::span<const std::byte> image_;
  order::TableImage tables_;
  uint64_t digest_ = 0;
  size_t node_bytes_ = 0;
  int readers_on_node_ = 0;
};

}  // namespace gridfeed::dist
