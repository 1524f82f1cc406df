// Internal to feed/: the Feeder's state and its phases (Feeder::Impl), shared by the files that
// implement them: feeder_startup.cc (Open's phases from agreeing on the options to the device
// path), feeder_resume.cc (the checkpoint cursor: resume and save), feeder_read.cc (prefetch,
// assembly and Next) and feeder.cc (construction and accessors). Nothing outside feed/ includes
// it; the public API is feeder.h.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "gridfeed/checkpoint/cursor.h"
#include "gridfeed/device/tp_broadcast.h"
#include "gridfeed/feed/feeder.h"
#include "gridfeed/feed/payload.h"
#include "gridfeed/order/pipeline.h"
#include "gridfeed/order/read_schedule.h"
#include "gridfeed/parallel/grid.h"
#include "gridfeed/parallel/shared_image.h"

namespace gridfeed::feed {

// Collective on the TP group `comm`: TP rank 0's payload in `layout` into every rank's (sized
// total_bytes): the fixed part, then each variable field's used values.
Status BroadcastPayload(MPI_Comm comm, const PayloadLayout& layout,
                        std::vector<std::byte>* payload);

// A table producer's step (feeder_producers.cc, feeder_whole_producers.cc): its exceptions
// (bad_alloc included) as its error.
template <typename Step>
Status Guarded(Step&& step) {
  try {
    return step();
  } catch (const std::bad_alloc&) {
    return Internal("out of memory while building the tables");
  } catch (const std::exception& e) {
    return Internal(std::string("while building the tables: ") + e.what());
  }
}
// A producer's memory at a phase's end, for whoever profiles it (GRIDFEED_LOG_LEVEL=DEBUG).
void LogProducerMemory(int node, const char* phase);

struct Feeder::Impl {
  FeederOptions options;
  order::Split split = order::Split::kTrain;
  std::unique_ptr<parallel::Grid> grid;
  std::unique_ptr<order::Pipeline> pipeline;
  std::unique_ptr<parallel::SharedImage> image;
  std::unique_ptr<order::OrderView> view;  // readers only
  std::unique_ptr<order::ReadSchedule> schedule;
  std::unique_ptr<device::TpBroadcast> device_bcast;
  PayloadLayout layout;           // at the run's longest seq length (buffers are this size)
  order::SeqLengths seq_lengths;  // tokens per sample along the split (every rank)
  std::string canonical, fingerprint;
  std::string store_facts;       // rank 0's token store facts (order::EncodeFacts)
  std::string schedule_history;  // amendable orders: checkpoint::Cursor's (every rank)
  StartupTimes startup;
  int64_t split_length = 0;
  int64_t node_window_from = -1;  // node windows: the cursor they start at; -1: whole images
  int64_t resumed_iteration = 0;
  int64_t consumed = 0;   // global samples after the last Next()
  int64_t next_step = 0;  // micro-batch steps handed out so far

  // Prefetch (readers only): packed payloads of steps [handed, produced).
  std::thread worker;
  std::mutex mu;
  std::condition_variable cv;
  struct Prefetched {
    // A read error of this step (then the thread has stopped and nothing follows).
    Status status;
    std::vector<std::byte> payload;
    std::vector<order::SampleRecord> records;
  };
  std::deque<Prefetched> ready;
  bool keeps_records = false;  // first-stage reader of CP rank 0
  bool stop = false;
  // The first error Next() returned (read error, TP broadcast): every later Next() returns it
  // (the prefetch thread has stopped, so nothing else would come).
  Status failed;

  // The phases of Open, in order; each is collective on the world and returns the same status
  // on every rank.
  Status AgreeOnOptions(MPI_Comm comm);
  Status CreateGrid(MPI_Comm comm);
  Status BuildAndShareTables();
  int64_t ExpectedStart() const;
  Result<parallel::ImageProducer> NodeProducer(const std::shared_ptr<order::BuiltOrder>& built,
                                               const order::ReadSchedule& from,
                                               const std::vector<int>& keys, bool world_node) const;
  // Many producers (feeder_producers.cc): whether the node leaders build the images with
  // `num_nodes` nodes (asked on world rank 0 only, which tells every rank: OLMo's units depend
  // on its files), and which: each node its own node image
  // (ProduceNodeImage), or every node the whole image (feeder_whole_producers.cc:
  // ProduceWholeImage; --node-window full, or orders without node images). A leader's share
  // of it is collective over `leaders` (parallel::LeaderProducer::make). World rank 0 also sets
  // the canonical text, its build's stores and `facts` ({split length, node windows' start, -1
  // for whole images}).
  enum class LeaderImages { kNone = 0, kNodeImages = 1, kWholeImage = 2 };
  LeaderImages LeadersMake(int num_nodes) const;
  Result<parallel::ImageProducer> ProduceNodeImage(MPI_Comm leaders, int node,
                                                   const std::vector<std::vector<int>>& keys,
                                                   int64_t* facts);
  Result<parallel::ImageProducer> ProduceWholeImage(MPI_Comm leaders, int node, int64_t* facts);
  // The producers' steps both kinds share, collective over `leaders`, each agreed among them:
  // every producer learns every producer's ShareFacts and adopts them (the split's length out);
  // then world rank 0 names the data by every producer's DataFacts (the canonical text one
  // producer's build gives) and sets its build's stores and `facts` ({length, start}).
  Status AdoptProducersFacts(MPI_Comm leaders, order::BuiltOrder& share, int64_t* length);
  Status MergeProducersDataFacts(MPI_Comm leaders, int node, order::BuiltOrder& share,
                                 int64_t length, int64_t start, int64_t* facts);
  // A producer's share by `build` (the testing flags' failures injected first), agreed among
  // the leaders; and its node's image by `assemble`, handed to Distribute (which agrees on it).
  Status BuildProducerShare(
      MPI_Comm leaders, int node,
      const std::function<Result<std::unique_ptr<order::BuiltOrder>>()>& build,
      std::unique_ptr<order::BuiltOrder>* share);
  Result<parallel::ImageProducer> AssembledImage(
      int node, int producers,
      const std::function<Result<std::unique_ptr<order::ImageWriter>>()>& assemble);
  int produced_by = 1;  // on a leader: the producers that built its node's image
  Status OpenTokenStores();
  // How this reader shows it reads world rank 0's token files (order/store_facts.h): they are
  // rank 0's very files (stat'ed: O(files)), its node leader's very files (the leader proves
  // them), or it checks and digests them itself (world rank 0, node-local copies).
  enum class FilesProof { kRank0Files, kLeaderFiles, kOwnCheck };
  FilesProof files_proof = FilesProof::kOwnCheck;
  // World rank 0: the token stores its build opened and checked, until OpenTokenStores adopts
  // them (after it has taken the files' identities, so a file replaced in between is opened
  // anew and seen by the readers' checks).
  order::OpenStores built_stores;
  Status CheckTokenStores();
  Status Resume();
  // Rank 0: whether the saved order (recomputed from its canonical text) reads what this run's
  // tables read before the saved cursor (the pipeline's SamePast).
  Status SamePast(const checkpoint::Cursor& saved) const;
  Status PlanSchedule();
  Status OpenDevicePath();
  void StartPrefetch();

  // Assembles the payload of one step on a reader; the first read error.
  Status AssemblePacked(const order::StepBatch& batch, const PayloadLayout& at,
                        std::vector<std::byte>* out,
                        std::vector<order::SampleRecord>* records) const;
  Status Assemble(const order::StepBatch& batch, std::vector<std::byte>* out,
                  std::vector<order::SampleRecord>* records, order::AssemblyScratch* scratch) const;
  // Runs on the prefetch thread (never reads next_step, which the trainer's thread advances).
  void Prefetch();
  Prefetched Take();
  // Collective on the TP group (none with TP 1): TP rank 0's read status, status first, so a
  // reader's read error reaches its peers instead of data. Returns it (sticky in `failed`).
  Status ShareReadStatus(Status* read);

  // Stops and joins the prefetch thread (local; idempotent).
  void StopPrefetch() {
    if (worker.joinable()) {
      {
        std::lock_guard lock(mu);
        stop = true;
      }
      cv.notify_all();
      worker.join();
    }
  }
  ~Impl() { StopPrefetch(); }
};

}  // namespace gridfeed::feed
