// An opaque byte image produced once on world rank 0 and handed out over MPI into node-shared
// memory of the reader ranks: a fixed header first ({status, size}) to every rank, then the
// bytes to one leader per node, which checks the producer's digest; the node's other readers
// map the same MPI shared-memory window, so memory per node does not grow with its ranks.
// Either every node gets the same image (a broadcast among the leaders) or, when the producer
// makes one per node, world rank 0 sends each leader its node's own, node after node.
// What the bytes mean is the producer's business (order/'s table image); nothing is written to
// a file.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/parallel/grid.h"

namespace gridfeed::parallel {

// What rank 0 hands over: the image size, and a function that writes it (once) into memory of
// that size (8-byte aligned). Or, with `per_node`, each node an image of its own: that of node
// `node` (0 = world rank 0's), whose readers pass `keys` (Distribute's reader_key, in their node
// order); called on world rank 0 once per node, from several threads at once (so it must be
// thread safe); its errors end the job.
struct ImageProducer {
  size_t size = 0;
  std::function<void(std::byte* dst)> write;
  // Whether `write` leaves dst's pages untouched from user space (the kernel copies them).
  bool untouched = false;
  std::function<Result<ImageProducer>(int node, const std::vector<int>& keys)> per_node;
};

// Many producers: every node leader makes its own node's image together with the other leaders
// (the build divided among them, order/node_image.h), instead of world rank 0 making them all.
struct LeaderProducer {
  // How the leaders produce with `num_nodes` nodes: 0, they do not (world rank 0 builds); any
  // other value is handed to `make`. Called on world rank 0 only, which tells every rank (an
  // answer that read files could differ elsewhere); an exception there counts as 0.
  std::function<int(int num_nodes)> wanted;
  // On every leader, collective over `leaders` (world rank 0's leader is rank 0 there): the
  // image of node `node` (its rank among the leaders), given every node's reader keys in leader
  // order and world rank 0's `way` (wanted's answer). It agrees on its own failures among the
  // leaders before each exchange, so every leader leaves it; an error it returns on some leaders
  // only is agreed by Distribute. It must not throw.
  std::function<Result<ImageProducer>(int way, MPI_Comm leaders, int node,
                                      const std::vector<std::vector<int>>& keys)>
      make;
};

// How readers are grouped into nodes (one shared window and one leader per node).
struct NodeSplit {
  // 0: the machine's real nodes (MPI_COMM_TYPE_SHARED). N > 0, for tests on one machine:
  // simulated nodes of N consecutive world ranks (colour world rank / N); every rank of a
  // simulated node must be on one machine, or the window allocation fails (agreed).
  int ranks_per_node = 0;
  // Tests: the leader of this node flips a byte of its image after the broadcast, before its
  // digest check. Nodes are numbered world rank / ranks_per_node, or (real nodes) by the
  // leader's index among the leaders. -1 = off.
  int corrupt_node = -1;
  // Tests: the leader of this node (numbered as above; not world rank 0's) fails as if its
  // receive of the node's size had failed (per-node images only). -1 = off.
  int fail_receive_node = -1;
  // Tests: world rank 0's send of the image to its leader number this (leaders in order; not
  // world rank 0's own) fails. A failed exchange ends the job (MPI_Abort). -1 = off.
  int fail_send_node = -1;
};

struct DistributeTimes {
  double build_seconds = 0;      // rank 0's build (the producer's creation) + writing the image
  double broadcast_seconds = 0;  // header + image to the node leaders, digest checks
};

class SharedImage {
 public:
  // Called with the number of nodes holding a window.
  using MakeProducer = std::function<Result<ImageProducer>(int num_nodes)>;
  // The image's digest; `untouched`: its pages were written by the kernel (ImageProducer).
  using Digest = uint64_t (*)(std::span<const std::byte>, bool untouched);

  // Collective on grid.world(). `make` runs on world rank 0 only; `digest` on each node leader
  // (of what it received) and on world rank 0 (of what it sent). Every rank returns the same
  // status: rank 0's error ("rank 0 (table build): ..."), or a digest mismatch or MPI failure
  // on any reader. `reader_key`: what this reader tells a per-node producer (e.g. its DP rank).
  // `leaders`: where it wants to, the leaders make the node images (`make` then runs nowhere).
  static Result<std::unique_ptr<SharedImage>> Distribute(const Grid& grid, const MakeProducer& make,
                                                         Digest digest, DistributeTimes* times,
                                                         const NodeSplit& nodes = {},
                                                         int reader_key = 0,
                                                         const LeaderProducer* leaders = nullptr);
  // Frees the window: collective over the readers of the node (all readers destroy together).
  // While an exception unwinds it frees nothing, so a rank never waits for peers alone.
  ~SharedImage();

  // The image on readers; empty elsewhere.
  std::span<const std::byte> bytes() const { return bytes_; }
  // The image's digest (order::ImageDigest) as world rank 0 sent it; 0 where one node holds the
  // only window (nothing was broadcast to check).
  uint64_t digest() const { return digest_; }
  // Bytes this node holds for the job (the window; 0 off the readers).
  size_t node_bytes() const { return node_bytes_; }
  int readers_on_node() const { return readers_on_node_; }
  // The readers sharing this node's window (rank 0 = the leader that filled it); MPI_COMM_NULL
  // off the readers. Owned by this object.
  MPI_Comm node_comm() const { return node_comm_; }
  // Nodes holding a window (= node leaders), on every rank.
  int num_nodes() const { return num_nodes_; }
  // Readers of each node in leader order (world rank 0's node first); on world rank 0 only.
  const std::vector<int>& readers_per_node() const { return readers_per_node_; }
  // Each node's image digest in leader order, on world rank 0 only (0 where none was taken).
  const std::vector<uint64_t>& node_digests() const { return node_digests_; }
  // Whether the leaders made the node images (LeaderProducer).
  bool leader_produced() const { return leader_produced_; }

 private:
  SharedImage() = default;
  // The phases of Distribute on the readers (each collective as its comment in the .cc says).
  Status SplitNodes(const Grid& grid, const NodeSplit& nodes);
  Status AllocateWindow(MPI_Comm agree, int rank_name, uint64_t size, std::byte** base,
                        bool prefault);
  Status FillWhole(const Grid& grid, ImageProducer& producer, uint64_t size, Digest digest,
                   const NodeSplit& nodes, double* write_seconds);
  Status FillPerNode(const Grid& grid, ImageProducer& producer, int reader_key, Digest digest,
                     const NodeSplit& nodes, double* write_seconds);
  Status FillProduced(const Grid& grid, const LeaderProducer& produce, int way, int reader_key,
                      Digest digest, const NodeSplit& nodes, double* build_seconds);
  Status FinishNode(const Grid& grid, Digest digest, const NodeSplit& nodes, std::byte* base,
                    uint64_t size, uint64_t expected, Status local, bool digest_is_of_window);
  int NodeNumber(const Grid& grid, const NodeSplit& nodes) const;  // on a leader
  int node_rank_ = 0;
  MPI_Comm node_comm_ = MPI_COMM_NULL;
  MPI_Comm leaders_comm_ = MPI_COMM_NULL;
  MPI_Win window_ = MPI_WIN_NULL;
  std::span<const std::byte> bytes_;
  uint64_t digest_ = 0;
  size_t node_bytes_ = 0;
  int readers_on_node_ = 0;
  bool node_has_world0_ = false;  // this node's readers include world rank 0
  int num_nodes_ = 0;
  std::vector<int> readers_per_node_;
  std::vector<uint64_t> node_digests_;
  bool leader_produced_ = false;
};

}  // namespace gridfeed::parallel
