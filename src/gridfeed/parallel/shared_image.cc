#include "gridfeed/parallel/shared_image.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <exception>
#include <future>
#include <new>
#include <string>
#include <thread>

#include "gridfeed/core/log.h"
#include "gridfeed/core/page_array.h"
#include "gridfeed/core/stopwatch.h"
#include "gridfeed/core/usable_cpus.h"
#include "gridfeed/parallel/agree.h"

namespace gridfeed::parallel {
namespace {

// Point-to-point tags of the per-node exchange between world rank 0 and a node leader.
constexpr int kTagHead = 701, kTagReady = 702, kTagImage = 703, kTagDigest = 704;

// A node's image as world rank 0 made it, or why it could not.
struct MadeImage {
  Status status;
  PageArray<std::byte> bytes;  // uninitialised until written: no zero fill of fresh pages
  uint64_t digest = 0;
};

std::span<std::byte> BytesOf(uint64_t* words, size_t n) {
  return std::as_writable_bytes(std::span<uint64_t>(words, n));
}

// A failed step of the per-node exchange leaves its peer waiting for a message that will not
// come (and every other rank in the next collective): nothing can be agreed any more, so the
// job ends here, with the reason, from this rank.
[[noreturn]] void EndJob(const Grid& grid, const std::string& what, const Status& st) {
  log::Error(grid.Describe() + ": " + what + ": " + st.ToString() + "; ending the job (MPI_Abort)" +
             ": its peer would wait forever");
  MPI_Abort(grid.world(), 1);
  std::abort();  // MPI_Abort does not return
}

// The leader fills the whole window next: faulting its (4 KiB, shared) pages in with one call
// costs a fraction of one fault per page while copying (1.46 GB on a 2-vCPU VM: 0.3 s, then the
// copy 1.2 s, against 2.6 s for the copy that faults). Advice only: without it, the copy faults.
// Prefaults part `part` of `parts` of [base, base + size) (whole pages; the parts tile the
// range's pages). Returns false where the kernel refused the advice.
bool PrefaultForWrite(std::byte* base, uint64_t size, int part, int parts) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(base) + page - 1) / page * page;
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(base) + size) / page * page;
  if (hi <= lo) return true;
  const uintptr_t pages = (hi - lo) / page, per = (pages + parts - 1) / parts;
  const uintptr_t from = lo + std::min(pages, per * part) * page;
  const uintptr_t to = lo + std::min(pages, per * (part + 1)) * page;
  return to <= from || PopulateForWrite(reinterpret_cast<void*>(from), to - from);
}

}  // namespace

// Collective over the readers: the node communicator and the leaders' (failures agreed there).
Status SharedImage::SplitNodes(const Grid& grid, const NodeSplit& nodes) {
  int reader_rank = 0;
  MPI_Comm_rank(grid.reader_comm(), &reader_rank);
  Status split;
  if (nodes.ranks_per_node > 0) {
    split = MpiStatus(MPI_Comm_split(grid.reader_comm(), grid.world_rank() / nodes.ranks_per_node,
                                     reader_rank, &node_comm_),
                      "MPI_Comm_split(node)");
  } else {
    split = MpiStatus(MPI_Comm_split_type(grid.reader_comm(), MPI_COMM_TYPE_SHARED, reader_rank,
                                          MPI_INFO_NULL, &node_comm_),
                      "MPI_Comm_split_type(node)");
  }
  GRIDFEED_RETURN_IF_ERROR(AgreeOnStatus(grid.reader_comm(), split, grid.world_rank()));
  MPI_Comm_rank(node_comm_, &node_rank_);
  MPI_Comm_size(node_comm_, &readers_on_node_);
  split = MpiStatus(MPI_Comm_split(grid.reader_comm(), node_rank_ == 0 ? 0 : MPI_UNDEFINED,
                                   reader_rank, &leaders_comm_),
                    "MPI_Comm_split(leaders)");
  GRIDFEED_RETURN_IF_ERROR(AgreeOnStatus(grid.reader_comm(), split, grid.world_rank()));
  if (node_rank_ == 0) MPI_Comm_size(leaders_comm_, &num_nodes_);
  int world0 = grid.world_rank() == 0 ? 1 : 0;
  split = MpiStatus(MPI_Allreduce(MPI_IN_PLACE, &world0, 1, MPI_INT, MPI_MAX, node_comm_),
                    "MPI_Allreduce(world rank 0's node)");
  GRIDFEED_RETURN_IF_ERROR(AgreeOnStatus(grid.reader_comm(), split, grid.world_rank()));
  node_has_world0_ = world0 == 1;
  return Status::Ok();
}

// Collective over the node: the window (`size` bytes on the leader), failures agreed on
// `agree` (the readers, or the node alone when nodes fill one after another).
Status SharedImage::AllocateWindow(MPI_Comm agree, int rank_name, uint64_t size, std::byte** base,
                                   bool prefault) {
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  const MPI_Aint bytes = node_rank_ == 0 ? static_cast<MPI_Aint>(size) : 0;
  int rc =
      MPI_Win_allocate_shared(std::max<MPI_Aint>(bytes, 1), 1, info, node_comm_, base, &window_);
  MPI_Info_free(&info);
  GRIDFEED_RETURN_IF_ERROR(
      AgreeOnStatus(agree, MpiStatus(rc, "MPI_Win_allocate_shared"), rank_name));
  MPI_Aint leader_size = 0;
  int disp = 0;
  // The leader's segment: a failure anywhere is agreed before anyone touches `base`.
  GRIDFEED_RETURN_IF_ERROR(
      AgreeOnStatus(agree,
                    MpiStatus(MPI_Win_shared_query(window_, 0, &leader_size, &disp, base),
                              "MPI_Win_shared_query"),
                    rank_name));
  // A shared page is the node's whoever faults it in first: every rank of the node (asleep
  // otherwise) faults in its share, spreading the cost over the node's cores; the leader then
  // maps the whole, cheaply where its peers were first (1.46 GB, 8 ranks on 2 vCPUs, window
  // allocated and prefaulted: 0.87-1.29 s against 1.26-1.71 s for the leader alone).
  if (!prefault) return Status::Ok();
  if (readers_on_node_ > 1) PrefaultForWrite(*base, size, node_rank_, readers_on_node_);
  if (node_rank_ == 0 && !PrefaultForWrite(*base, size, 0, 1)) {
    log::Debug(std::string("the window is not prefaulted (madvise: ") + std::strerror(errno) +
               "); it faults while filled");
  }
  return Status::Ok();
}

// Collective over the readers: world rank 0 writes the one image into its window, freeing the
// tables as it goes, and the leaders broadcast it among themselves.
Status SharedImage::FillWhole(const Grid& grid, ImageProducer& producer, uint64_t size,
                              Digest digest, const NodeSplit& nodes, double* write_seconds) {
  std::byte* base = nullptr;
  Stopwatch write;
  // World rank 0's node is not prefaulted: the producer fills it a piece at a time while it
  // frees its tables (ImageWriter), so the window takes the pages the tables give back and the
  // node never holds both in full (1.46 GB, 8 ranks on 2 vCPUs: window allocated and written
  // in 0.65-0.75 s against 1.06-1.39 s prefaulted). The other nodes receive the broadcast
  // into a prefaulted window.
  Status local = AllocateWindow(grid.reader_comm(), grid.world_rank(), size, &base,
                                /*prefault=*/!node_has_world0_);
  if (!local.ok()) return local;  // agreed on every reader
  uint64_t expected = 0;
  if (node_rank_ == 0) {
    if (grid.world_rank() == 0) {
      const double allocate = write.Lap();
      producer.write(base);
      const double copy = write.Lap();
      const bool untouched = producer.untouched;
      producer = ImageProducer();  // frees what the producer still holds
      const double free = write.Lap();
      // The digest checks what a broadcast delivered: with one node nothing is sent (0.09 s for
      // 540 MB saved), unless a test corrupts this node's window on purpose.
      if (num_nodes_ > 1 || nodes.corrupt_node >= 0) {
        expected = digest(std::span<const std::byte>(base, size), untouched);
      }
      *write_seconds = copy + free;
      if (log::Enabled(log::Level::kDebug)) {
        log::Debug("image into the window: allocate " + std::to_string(allocate) + " s, write " +
                   std::to_string(copy) + " s, free the tables " + std::to_string(free) +
                   " s, digest " + std::to_string(write.Lap()) + " s");
      }
    }
    local = BroadcastBytes(leaders_comm_, 0, std::span<std::byte>(base, size));
    if (local.ok()) {
      local = MpiStatus(MPI_Bcast(&expected, 1, MPI_UINT64_T, 0, leaders_comm_),
                        "MPI_Bcast(table digest)");
    }
  }
  // World rank 0's digest was taken of this very window: its leader check is skipped.
  return FinishNode(grid, digest, nodes, base, size, expected, local,
                    /*digest_is_of_window=*/grid.world_rank() == 0);
}

// Node after node, without collectives across nodes (world rank 0 is busy with one node at a
// time): the leaders send their readers' keys to world rank 0, which makes each node's image,
// tells its leader the size (or that it failed), waits until the node has its window and then
// sends the bytes and their digest. Readers wait asleep. Every reader reaches FinishNode.
Status SharedImage::FillPerNode(const Grid& grid, ImageProducer& producer, int reader_key,
                                Digest digest, const NodeSplit& nodes, double* write_seconds) {
  const bool world0 = grid.world_rank() == 0;
  std::vector<int> node_keys(static_cast<size_t>(readers_on_node_));
  Status local =
      MpiStatus(MPI_Gather(&reader_key, 1, MPI_INT, node_keys.data(), 1, MPI_INT, 0, node_comm_),
                "MPI_Gather(reader keys)");
  std::vector<int> counts(static_cast<size_t>(world0 ? num_nodes_ : 0)), displs, keys;
  if (local.ok() && node_rank_ == 0) {
    local = MpiStatus(
        MPI_Gather(&readers_on_node_, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, leaders_comm_),
        "MPI_Gather(reader counts)");
    int total = 0;
    for (int c : counts) displs.push_back(total), total += c;
    keys.resize(static_cast<size_t>(total));
    if (local.ok()) {
      local = MpiStatus(MPI_Gatherv(node_keys.data(), readers_on_node_, MPI_INT, keys.data(),
                                    counts.data(), displs.data(), MPI_INT, 0, leaders_comm_),
                        "MPI_Gatherv(reader keys)");
    }
  }
  local = AgreeOnStatus(grid.reader_comm(), local, grid.world_rank());
  if (!local.ok()) return local;  // agreed on every reader, before any node waits alone

  Stopwatch busy;
  // World rank 0: `step` for node l's image, its exceptions (a thread's included) turned into
  // the error naming the node.
  auto guarded = [](int l, auto&& step) -> Status {
    const std::string what = "node " + std::to_string(l) + "'s table image";
    Status st;
    try {
      st = step();
    } catch (const std::bad_alloc&) {
      st = Internal("out of memory while making " + what);
    } catch (const std::exception& e) {
      st = Internal("while making " + what + ": " + e.what());
    }
    return st.ok() ? st : st.WithContext(what);
  };
  auto producer_of = [&](int l, ImageProducer* out) -> Status {
    return guarded(l, [&]() -> Status {
      const std::vector<int> mine(keys.begin() + displs[l], keys.begin() + displs[l] + counts[l]);
      GRIDFEED_ASSIGN_OR_RETURN(*out, producer.per_node(l, mine));
      return Status::Ok();
    });
  };
  // Node l's image, written and digested (l > 0, on a thread of its own).
  auto make = [&](int l) -> MadeImage {
    MadeImage out;
    ImageProducer p;
    out.status = producer_of(l, &p);
    if (!out.status.ok()) return out;
    out.status = guarded(l, [&] {
      out.bytes = PageArray<std::byte>(p.size);  // 2 MiB aligned
      p.write(out.bytes.data());
      out.digest = digest(out.bytes, p.untouched);
      return Status::Ok();
    });
    return out;
  };
  // The other nodes' images are made ahead on up to max_ahead threads (as many images held).
  std::deque<std::future<MadeImage>> ahead;
  int next_ahead = 1;
  const int max_ahead = static_cast<int>(std::clamp<unsigned>(UsableCpus(), 1, 8));
  auto launch = [&] {
    while (world0 && next_ahead < num_nodes_ && static_cast<int>(ahead.size()) < max_ahead) {
      ahead.push_back(std::async(std::launch::async, make, next_ahead++));
    }
  };
  launch();
  Status made;  // world rank 0: the first node's failure; later nodes are told none was made
  // Every node: its size (head[0] = 1 when made), its window, then the bytes.
  uint64_t head[2] = {0, 0}, expected = 0;
  std::byte* base = nullptr;
  ImageProducer own;  // world rank 0's node: written straight into its window
  if (world0) {
    made = producer_of(0, &own);
    head[0] = made.ok() ? 1 : 0;
    head[1] = made.ok() ? own.size : 0;
  } else if (node_rank_ == 0) {
    local = SleepyReceiveBytes(leaders_comm_, 0, kTagHead, BytesOf(head, 2));
    if (local.ok() && NodeNumber(grid, nodes) == nodes.fail_receive_node) {
      head[0] = head[1] = 0;  // as if nothing arrived
      local =
          Status(StatusCode::kAborted, "cannot receive this node's image size (injected by test)");
    }
  }
  Status node = SleepyBarrier(node_comm_);  // peers sleep while their leader waits
  if (node.ok()) node = MpiStatus(MPI_Bcast(head, 2, MPI_UINT64_T, 0, node_comm_), "MPI_Bcast");
  if (local.ok()) local = node;
  if (local.ok() && head[0] == 0) {
    local = world0 ? made
                   : Status(StatusCode::kAborted, "world rank 0 made no table image for this node");
  }
  // The node takes one path, and agrees on its own allocation (a leader whose node has no
  // window tells world rank 0 so).
  local = AgreeOnStatus(node_comm_, local, grid.world_rank());
  if (local.ok()) {
    local = AllocateWindow(node_comm_, grid.world_rank(), head[1], &base, /*prefault=*/true);
  }
  const bool allocated = local.ok();
  if (world0) {
    if (local.ok()) {
      local = guarded(0, [&] {  // an error: every rank learns it in Distribute's agreement
        own.write(base);
        expected = digest(std::span<const std::byte>(base, head[1]), own.untouched);
        return Status::Ok();
      });
    }
    own = ImageProducer();
    for (int l = 1; l < num_nodes_; ++l) {
      MadeImage p = ahead.front().get();
      ahead.pop_front();
      launch();
      if (made.ok()) made = p.status;
      uint64_t h[2] = {made.ok() ? uint64_t{1} : 0, p.bytes.size()};
      Status sent = SendBytes(leaders_comm_, l, kTagHead, BytesOf(h, 2));
      // Every leader answers, whatever it received: one whose receive failed does not know
      // whether this rank waits, so this rank always does.
      uint64_t ready = 0;
      if (sent.ok()) {
        sent = MpiStatus(
            MPI_Recv(&ready, 1, MPI_UINT64_T, l, kTagReady, leaders_comm_, MPI_STATUS_IGNORE),
            "MPI_Recv(node ready)");
      }
      if (sent.ok() && h[0] == 1 && ready == 1) {
        sent = l == nodes.fail_send_node
                   ? Status(StatusCode::kAborted, "cannot send the image (injected by test)")
                   : SendBytes(leaders_comm_, l, kTagImage, p.bytes);
        if (sent.ok()) sent = SendBytes(leaders_comm_, l, kTagDigest, BytesOf(&p.digest, 1));
      }
      if (!sent.ok()) EndJob(grid, "exchange with node " + std::to_string(l) + "'s leader", sent);
    }
    producer = ImageProducer();  // frees the tables
    if (local.ok()) local = made;
    *write_seconds = busy.Seconds();
  } else if (node_rank_ == 0) {
    // World rank 0 waits for this answer from every leader (a failed receive included).
    uint64_t ready = allocated && head[0] == 1 ? 1 : 0;
    Status got = SendBytes(leaders_comm_, 0, kTagReady, BytesOf(&ready, 1));
    if (got.ok() && ready == 1) {
      got = SleepyReceiveBytes(leaders_comm_, 0, kTagImage, std::span<std::byte>(base, head[1]));
      if (got.ok()) got = SleepyReceiveBytes(leaders_comm_, 0, kTagDigest, BytesOf(&expected, 1));
    }
    if (!got.ok()) EndJob(grid, "exchange with world rank 0", got);
  }
  // World rank 0's digest was taken of its very window: its leader check is skipped.
  return FinishNode(grid, digest, nodes, base, head[1], expected, local,
                    /*digest_is_of_window=*/world0);
}

// Collective over the readers: the leaders learn every node's reader keys, make their own
// nodes' images together (LeaderProducer::make, collective among them) while their peers
// sleep, agree on the outcome, then fill and digest their windows.
Status SharedImage::FillProduced(const Grid& grid, const LeaderProducer& produce, int way,
                                 int reader_key, Digest digest, const NodeSplit& nodes,
                                 double* build_seconds) {
  std::vector<int> node_keys(static_cast<size_t>(readers_on_node_));
  Status local =
      MpiStatus(MPI_Gather(&reader_key, 1, MPI_INT, node_keys.data(), 1, MPI_INT, 0, node_comm_),
                "MPI_Gather(reader keys)");
  std::vector<std::vector<int>> keys;
  if (local.ok() && node_rank_ == 0) {
    std::vector<int> counts(static_cast<size_t>(num_nodes_)), displs;
    local = MpiStatus(
        MPI_Allgather(&readers_on_node_, 1, MPI_INT, counts.data(), 1, MPI_INT, leaders_comm_),
        "MPI_Allgather(reader counts)");
    int total = 0;
    for (int c : counts) displs.push_back(total), total += c;
    std::vector<int> all(static_cast<size_t>(total));
    if (local.ok()) {
      local = MpiStatus(MPI_Allgatherv(node_keys.data(), readers_on_node_, MPI_INT, all.data(),
                                       counts.data(), displs.data(), MPI_INT, leaders_comm_),
                        "MPI_Allgatherv(reader keys)");
    }
    for (size_t l = 0; l < counts.size(); ++l) {
      keys.emplace_back(all.begin() + displs[l], all.begin() + displs[l] + counts[l]);
    }
  }
  local = AgreeOnStatus(grid.reader_comm(), local, grid.world_rank());
  if (!local.ok()) return local;  // agreed on every reader, before any leader produces
  Stopwatch watch;
  ImageProducer own;
  if (node_rank_ == 0) {
    int node = 0;
    MPI_Comm_rank(leaders_comm_, &node);
    try {
      auto made = produce.make(way, leaders_comm_, node, keys);
      if (made.ok()) {
        own = std::move(made).value();
      } else {
        local = made.status();
      }
    } catch (const std::exception& e) {  // its contract forbids it; a message, not terminate
      local = Internal(std::string("while producing this node's tables: ") + e.what());
    }
  }
  *build_seconds = watch.Seconds();
  uint64_t size = own.size;
  const Status slept = SleepyBarrier(node_comm_);  // peers sleep while their leader produces
  if (local.ok()) local = slept;
  const Status told =
      MpiStatus(MPI_Bcast(&size, 1, MPI_UINT64_T, 0, node_comm_), "MPI_Bcast(node image size)");
  if (local.ok()) local = told;
  local = AgreeOnStatus(grid.reader_comm(), local, grid.world_rank());
  if (!local.ok()) return local;
  std::byte* base = nullptr;
  local = AllocateWindow(grid.reader_comm(), grid.world_rank(), size, &base, /*prefault=*/true);
  if (!local.ok()) return local;  // agreed on every reader
  uint64_t expected = 0;
  if (node_rank_ == 0) {
    try {
      own.write(base);
      expected = digest(std::span<const std::byte>(base, size), own.untouched);
    } catch (const std::exception& e) {
      local = Internal(std::string("while writing this node's tables: ") + e.what());
    }
  }
  own = ImageProducer();
  leader_produced_ = true;
  // The leader's digest is of its own window: checked again only where a test corrupts it.
  return FinishNode(grid, digest, nodes, base, size, expected, local,
                    /*digest_is_of_window=*/true);
}

// Collective over the readers (every reader, whatever `local` says): the leader checks its
// copy's digest, the leaders report their readers to world rank 0, the node's peers read only
// after their leader filled the window (they sleep while it writes) and learn its digest.
// A leader's node number: world rank / ranks per node when simulated, else its leader index.
int SharedImage::NodeNumber(const Grid& grid, const NodeSplit& nodes) const {
  if (nodes.ranks_per_node > 0) return grid.world_rank() / nodes.ranks_per_node;
  int node = 0;
  MPI_Comm_rank(leaders_comm_, &node);
  return node;
}

Status SharedImage::FinishNode(const Grid& grid, Digest digest, const NodeSplit& nodes,
                               std::byte* base, uint64_t size, uint64_t expected, Status local,
                               bool digest_is_of_window) {
  if (node_rank_ == 0) {
    const int node = NodeNumber(grid, nodes);
    bool check = !digest_is_of_window;
    if (local.ok() && node == nodes.corrupt_node && size > 0) {
      base[size / 2] ^= std::byte{0xff};  // injected by a test
      check = true;
    }
    // The node's readers share this copy, so its leader's check covers them all. Where
    // `expected` was taken of this window (world rank 0, one image: nothing was transferred
    // since), a second pass over the whole image would only repeat it.
    if (local.ok() && check && digest(std::span<const std::byte>(base, size), false) != expected) {
      local = DataLoss("image digest mismatch after the broadcast on node " + std::to_string(node) +
                       " (leader " + grid.Describe() + ")");
    }
    // What each node's window serves, for reports (on every leader, whatever happened).
    if (grid.world_rank() == 0) readers_per_node_.assign(num_nodes_, 0);
    const Status gathered =
        MpiStatus(MPI_Gather(&readers_on_node_, 1, MPI_INT, readers_per_node_.data(), 1, MPI_INT, 0,
                             leaders_comm_),
                  "MPI_Gather(readers per node)");
    if (local.ok()) local = gathered;
    if (grid.world_rank() == 0) node_digests_.assign(num_nodes_, 0);
    const Status digests = MpiStatus(MPI_Gather(&expected, 1, MPI_UINT64_T, node_digests_.data(), 1,
                                                MPI_UINT64_T, 0, leaders_comm_),
                                     "MPI_Gather(node digests)");
    if (local.ok()) local = digests;
  }
  const Status filled = SleepyBarrier(node_comm_);
  if (local.ok()) local = filled;
  const Status told =
      MpiStatus(MPI_Bcast(&expected, 1, MPI_UINT64_T, 0, node_comm_), "MPI_Bcast(node digest)");
  if (local.ok()) local = told;
  if (local.ok()) {
    node_bytes_ = size;
    digest_ = expected;
    bytes_ = std::span<const std::byte>(base, size);
  }
  return local;
}

Result<std::unique_ptr<SharedImage>> SharedImage::Distribute(const Grid& grid,
                                                             const MakeProducer& make,
                                                             Digest digest, DistributeTimes* times,
                                                             const NodeSplit& nodes, int reader_key,
                                                             const LeaderProducer* leaders) {
  std::unique_ptr<SharedImage> st(new SharedImage());
  MPI_Comm world = grid.world();
  Stopwatch watch;
  // 1. The readers group into nodes, so rank 0 builds knowing how many there are.
  const Status split = grid.is_reader() ? st->SplitNodes(grid, nodes) : Status::Ok();
  GRIDFEED_RETURN_IF_ERROR(AgreeOnStatus(world, split, grid.world_rank()));
  const double split_seconds = watch.Lap();
  // 2. Rank 0 builds; everyone learns the outcome from a fixed header first. Or the leaders
  // build together (their way is a function of the node count, which world rank 0 tells all).
  int way = 0;
  if (leaders) {
    int decision[2] = {st->num_nodes_, 0};  // world rank 0's node count and way
    if (grid.world_rank() == 0) {
      try {
        decision[1] = leaders->wanted(decision[0]);
      } catch (...) {
        decision[1] = 0;  // rank 0 then builds alone, and its build names the error
      }
    }
    GRIDFEED_RETURN_IF_ERROR(
        MpiStatus(MPI_Bcast(decision, 2, MPI_INT, 0, world), "MPI_Bcast(node count)"));
    way = decision[1];
  }
  const bool produced = way != 0;
  ImageProducer producer;
  Status built;
  // The whole image's size; 1 when each node gets its own from world rank 0, 2 from its leader.
  uint64_t header[2] = {0, produced ? uint64_t{2} : 0};
  if (grid.world_rank() == 0 && !produced) {
    auto r = make(st->num_nodes_);
    if (r.ok()) {
      producer = std::move(r).value();
      header[0] = producer.size;
      header[1] = producer.per_node ? 1 : 0;
    } else {
      built = r.status().WithContext("rank 0 (table build)");
    }
  }
  const double build_seconds = watch.Lap();
  // The others wait here for the build without polling (every rank, whatever the outcome).
  if (!produced) {
    GRIDFEED_RETURN_IF_ERROR(SleepyBarrier(world));
    GRIDFEED_RETURN_IF_ERROR(BroadcastStatus(world, 0, built));
    GRIDFEED_RETURN_IF_ERROR(
        MpiStatus(MPI_Bcast(header, 2, MPI_UINT64_T, 0, world), "MPI_Bcast(table header)"));
  }
  // 3. The image goes to the readers' windows.
  double write_seconds = 0;  // rank 0 writing the image(s)
  Status local;
  double produce_seconds = 0;  // a leader making its node's image with the others
  if (grid.is_reader()) {
    if (header[1] == 2) {
      local = st->FillProduced(grid, *leaders, way, reader_key, digest, nodes, &produce_seconds);
    } else if (header[1] == 1) {
      local = st->FillPerNode(grid, producer, reader_key, digest, nodes, &write_seconds);
    } else {
      local = st->FillWhole(grid, producer, header[0], digest, nodes, &write_seconds);
    }
  }
  // Ranks done early (non-readers; nodes filled before others) sleep until all are done.
  const Status all_done = SleepyBarrier(world);
  if (local.ok()) local = all_done;
  GRIDFEED_RETURN_IF_ERROR(AgreeOnStatus(world, local, grid.world_rank()));
  int num_nodes = st->num_nodes_;  // known on the leaders; world rank 0 tells everyone
  GRIDFEED_RETURN_IF_ERROR(
      MpiStatus(MPI_Bcast(&num_nodes, 1, MPI_INT, 0, world), "MPI_Bcast(node count)"));
  st->num_nodes_ = num_nodes;
  if (times) {
    times->build_seconds = build_seconds + write_seconds + produce_seconds;
    times->broadcast_seconds = split_seconds + watch.Lap() - write_seconds - produce_seconds;
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
