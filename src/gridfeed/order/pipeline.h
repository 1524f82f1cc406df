// The pipeline seam: a data order is an implementation of Pipeline (options + token stores ->
// tables -> image) and OrderView (image or tables + position -> sample and record). Megatron's
// order is one (megatron_pipeline.h); OLMo's global order and scheduled mixtures plug in here
// without touching feed/, parallel/, checkpoint/ or audit/, which see only these interfaces.
//
// Who calls what: world rank 0 (and offline tools) Build() in process; the feeder writes the
// built tables' image into the broadcast memory and every reader ViewImage()s it; offline tools
// use the built tables' view directly. Every rank derives anything else from the options.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/field_schema.h"
#include "gridfeed/order/image_writer.h"
#include "gridfeed/order/sample.h"
#include "gridfeed/order/sample_fields.h"
#include "gridfeed/order/sample_record.h"
#include "gridfeed/order/split.h"
#include "gridfeed/order/store_facts.h"

namespace gridfeed::io {
class IndexedDataset;
}

namespace gridfeed::order {

// Token stores a build opened with every check, by prefix: a view of its image in the same
// process (world rank 0's) adopts them instead of opening and checking them again.
using OpenStores = std::map<std::string, std::shared_ptr<const io::IndexedDataset>>;

// A source of a split's samples (a blend component), for accounting.
struct SourceInfo {
  std::string name;               // e.g. the data prefix
  double weight = 1;              // target share
  int64_t samples_per_epoch = 0;  // one pass over the source's share of the split
  int64_t seq_length = 0;         // tokens per sample when not the run's --seq-length (0)
};

// Tokens per sample along the train split's positions: the run's --seq-length throughout, or a
// mixture schedule's stage lengths (piecewise constant; a change only at a global batch
// boundary, so a micro-batch has one shape). A pure function of the options: every rank, reader
// or not, computes the same.
struct SeqLengths {
  std::vector<int64_t> begin;   // first position of each piece; begin[0] = 0
  std::vector<int64_t> length;  // tokens per sample from there on
  int64_t At(int64_t position) const;
  int64_t max() const;
  bool uniform() const { return length.size() == 1; }
  // The one length of all `positions` (their arrays share a shape); InvalidArgument naming two
  // positions of different lengths otherwise.
  Result<int64_t> Common(std::span<const int64_t> positions) const;
};
// Of `split` (only the train split has stages). InvalidArgument as the pipeline's layout would
// give it (e.g. a bad schedule).
Result<SeqLengths> SeqLengthsOf(const config::JobOptions& options, Split split = Split::kTrain);

// A scheduled order's stages along the train split and its targets, as an audit's accounting
// needs them (Pipeline::Stages). The functions hold what they need (no reference to the
// pipeline); pure, so thread safe.
struct StagePlan {
  std::vector<std::string> names;   // per stage
  std::vector<int64_t> begin;       // first position of each stage, then the order's length
  std::vector<int64_t> seq_length;  // tokens per sample of each stage
  int64_t length = 0;               // positions of the order
  int64_t run_seq_length = 0;       // the run's --seq-length
  // The stage holding `position` (the last stage for position >= length).
  std::function<int(int64_t)> stage_at;
  // The schedule's cumulative target of source k: target samples among positions [0, q).
  std::function<double(size_t, int64_t)> cumulative_target;
};

// Where one packed micro-batch goes on one CP rank (OrderView::ReadPacked): the sequence
// fields flattened to one row of mbs x S / cp elements (null = not wanted on this stage), the
// merged cu_seqlens (at most mbs x S + 1 entries) with its entry count, and max_seqlen. Not
// owned.
struct PackedTargets {
  int64_t* tokens = nullptr;
  int64_t* position_ids = nullptr;
  int64_t* labels = nullptr;
  float* loss_mask = nullptr;
  int32_t* cu_seqlens = nullptr;
  int64_t cu_capacity = 0;
  int64_t* num_cu_seqlens = nullptr;
  int32_t* max_seqlen = nullptr;
  int64_t cp_size = 1;
  int64_t cp_rank = 0;
};

// What a rank knows of a data order. Const methods are thread safe (the prefetch thread reads
// while the trainer's thread asks for lengths).
class OrderView {
 public:
  virtual ~OrderView() = default;
  // Samples in the split's top-level order; 0 when the split is absent.
  virtual int64_t length(Split split) const = 0;
  // Token stores a reader needs open, as the options name them.
  virtual const std::vector<std::string>& token_stores() const = 0;
  // The files behind the token stores (paths as the options give them), so readers can show
  // they read the very same files (io::FileIdentity).
  virtual std::vector<std::string> TokenFiles() const = 0;
  // Opens every token store not open yet (views over tables built in process have them open).
  // `checked_on_node`: another process on this machine opened the very same files (see
  // TokenFiles) with every check, so only their structure is checked here, and an order may
  // defer that to the store's first read (Megatron's: order/megatron/deferred_store.h).
  virtual Status OpenTokenStores(bool checked_on_node) = 0;
  // Facts of every open token store, in token_stores() order (see store_facts.h).
  virtual std::vector<StoreFacts> TokenStoreFacts(uint64_t salt) const = 0;
  // What TokenStoreFacts would say on a reader whose TokenFiles are world rank 0's very files
  // (order::SameFile), given rank 0's `reference`, without reading them: the default takes
  // `reference`. An order whose facts also describe what TokenFiles does not name puts its own
  // facts of that in.
  virtual std::vector<StoreFacts> FactsOfRank0Files(
      uint64_t salt, const std::vector<StoreFacts>& reference) const {
    (void)salt;
    return reference;
  }
  // Takes, of `stores` (this process's build: BuiltOrder::OpenedStores), those this view reads
  // whose files are unchanged since they were opened (io::IndexedDataset::Unchanged);
  // OpenTokenStores then leaves them be. Orders without such stores ignore it.
  virtual void AdoptTokenStores(const OpenStores& stores) { (void)stores; }
  // Assembles sample `position` of `split` into `out` and returns what it is (iteration,
  // micro-batch and DP rank are left for the caller); token_xxh3 only with `hash_tokens` (a
  // pass over the tokens that only the ledger and the audit need). REQUIRES: 0 <= position <
  // length(split) and the token stores open.
  virtual SampleRecord Read(Split split, int64_t position, Sample* out, bool hash_tokens) const = 0;
  // Read, writing only the fields `out` names and only its CP slice, straight into the caller's
  // memory (sample_fields.h); `scratch` belongs to the calling thread. token_xxh3 still covers
  // the whole sample's tokens. The default reads the whole sample and slices it.
  virtual SampleRecord ReadFields(Split split, int64_t position, const FieldTargets& out,
                                  bool hash_tokens, AssemblyScratch* scratch) const;
  // The sample index a micro-batch reports for `position`: the position itself (Megatron's
  // top-level dataset index), or the pipeline's own (OLMo: the instance index).
  virtual int64_t SampleIndex(Split split, int64_t position) const {
    (void)split;
    return position;
  }
  // The cursor `consumed` in the order's own terms, as JSON (empty: none), kept in checkpoints.
  virtual std::string DescribeCursor(Split split, int64_t consumed) const {
    (void)split, (void)consumed;
    return {};
  }
  // Packed sequences (SFT): a micro-batch is handed over as Megatron's get_batch leaves it for
  // --sft: flattened to one sequence, cu_seqlens merged, CP slices by THD partitioning.
  virtual bool packed() const { return false; }
  // The micro-batch of `positions` into `out`, one record per position (iteration, micro-batch
  // and DP rank left for the caller). Only for packed orders (Unimplemented otherwise); errors
  // name the sample's source.
  virtual Status ReadPacked(Split split, std::span<const int64_t> positions,
                            const PackedTargets& out, bool hash_tokens,
                            std::vector<SampleRecord>* records) const;
  // Orders whose samples depend on the order they are fetched in (FIM: one random stream per
  // Megatron DataLoader worker, advanced by every fetch). A reader of such a view fetches its
  // DP rank's micro-batches in order from the run's start (or resume: streams restart there,
  // as Megatron's rebuilt datasets do) and calls BeginMicroBatch(k) before the positions of
  // the k-th (k = 0, 1, ...; k = 0 begins a walk: the streams start afresh, so one view can
  // replay several DP ranks' walks, as the audit does). Read and ReadFields of such a view then
  // change its state: one thread at a time.
  virtual bool fetch_ordered() const { return false; }
  virtual void BeginMicroBatch(int64_t k) const { (void)k; }
  // Whether the split's positions are spread over sources by a blend table (also with one
  // weighted source).
  virtual bool is_blend(Split split) const = 0;
  // The source serving `position` (0 without a blend), and every source of the split.
  virtual int SourceOf(Split split, int64_t position) const = 0;
  virtual std::vector<SourceInfo> Sources(Split split) const = 0;
};

// Wall seconds of a build's phases on this process's cores, and the blend's bytes: what a
// projection of a build divided among producers (gridfeed bench --project-nodes) scales.
struct BuildPhases {
  double open_seconds = 0, tables_seconds = 0;  // opening the stores; their tables
  double blend_seconds = 0;                     // the blend table alone (its own thread)
  uint64_t blend_bytes = 0;
  int threads = 0;  // the build's threads (cores used)
};

// Tables built in process (world rank 0, offline tools).
class BuiltOrder {
 public:
  // The build's phases; zeros for orders that do not report them.
  virtual BuildPhases Phases() const { return {}; }
  virtual ~BuiltOrder() = default;
  // JSON facts about the data the build read (sizes and digests of the token files): part of
  // the canonical text, so a changed file changes the fingerprint.
  virtual std::string DataFacts() const = 0;
  // A view over these tables, with their token stores open. Valid while this object lives and
  // until TakeImage().
  virtual OrderView& view() = 0;
  // The token stores this build opened (checked in full) for OrderView::AdoptTokenStores;
  // empty for orders that have none to share. Before TakeImage.
  virtual OpenStores OpenedStores() const { return {}; }
  // Moves the tables into an image writer, which frees each table once written.
  virtual std::unique_ptr<ImageWriter> TakeImage() = 0;
  // The image of only the positions `held` (sorted, unique) of `split`: what one node's readers
  // read (--node-window; node_image.h), viewed by ViewImage like the whole image; reads and
  // records of held positions are the whole image's. `keep_source_index`: SourceOf answers for
  // every position (world rank 0's node: checkpoints count each source's samples). Null: this
  // order has no node images (every node then holds the whole image). Before TakeImage only.
  virtual Result<std::unique_ptr<ImageWriter>> NodeImage(Split split, std::vector<int64_t> held,
                                                         bool keep_source_index) const {
    (void)split, (void)held, (void)keep_source_index;
    return std::unique_ptr<ImageWriter>();
  }

  // A share of a build by several producers (Pipeline::BuildShare; node_image.h says how they
  // fit). FailedPrecondition for orders that have no shares.
  // The facts of the mids this share built, for every other producer's AdoptShareFacts.
  virtual std::vector<int64_t> ShareFacts() const { return {}; }
  // Learns the other producers' mids from every producer's ShareFacts (concatenated).
  virtual Status AdoptShareFacts(std::span<const int64_t> facts) {
    (void)facts;
    return FailedPrecondition("this order has no shares");
  }
  // Frees this share's own tables once every node's sections are cut (the view is then
  // unusable; the assembly needs only the blend and the facts).
  virtual void ReleaseShareTables() {}
  // Many producers of the whole image (Pipeline::BuildWholeShare): this share's sections of
  // the whole image (the tables of its units), framed by order/sections.h with `producer`.
  // After AdoptShareFacts.
  virtual Result<std::vector<std::byte>> WholeSections(int producer) const {
    (void)producer;
    return FailedPrecondition("this order has no whole-image shares");
  }
  // The whole image from every producer's sections (`sections[p]`: producer p's, freed as they
  // are read), byte for byte TakeImage's of one process's whole build; this share is spent
  // after it. DataLoss naming the producer for sections that fail their digest or shape, or a
  // unit given by no producer or by two.
  virtual Result<std::unique_ptr<ImageWriter>> AssembleWholeImage(
      std::vector<std::vector<std::byte>> sections) {
    (void)sections;
    return FailedPrecondition("this order has no whole-image shares");
  }
  // This share's sections of the node whose readers read `held` (sorted, unique) of `split`.
  virtual Result<std::vector<std::byte>> NodeSections(Split split, std::span<const int64_t> held,
                                                      int producer) const {
    (void)split, (void)held, (void)producer;
    return FailedPrecondition("this order has no shares");
  }
  // The node image of `held` from every producer's sections for it (`sections[p]`: producer
  // p's, freed as they are read), byte for byte NodeImage's of one process's whole build.
  virtual Result<std::unique_ptr<ImageWriter>> AssembleNodeImage(
      Split split, std::vector<int64_t> held, bool keep_source_index,
      std::vector<std::vector<std::byte>> sections) const {
    (void)split, (void)held, (void)keep_source_index, (void)sections;
    return FailedPrecondition("this order has no shares");
  }
};

class Pipeline {
 public:
  // The pipeline these options select (registry.h: FIM's with --fim-data, SFT's with --sft,
  // OLMo's with --olmo-paths, the scheduled mixture's with --mixture-schedule, else
  // Megatron's). Options are validated already; orders that depend on the batch geometry
  // (OLMo's) read the DP size (0 = 1, offline), batch sizes and --train-iters (how many epochs
  // to build) from them. InvalidArgument for a combination the pipeline cannot feed yet.
  static Result<std::unique_ptr<Pipeline>> For(const config::JobOptions& options);
  virtual ~Pipeline() = default;
  // Builds every table from the token stores (relative paths from the working directory).
  virtual Result<std::unique_ptr<BuiltOrder>> Build() const = 0;
  // Many producers (--table-producers; node_image.h): the token stores a build can be divided
  // by, in the order's first-use order; empty where one process builds it all (the default).
  virtual Result<std::vector<std::string>> DividedStores() const {
    return std::vector<std::string>{};
  }
  // One producer's share of the build: what every producer builds (e.g. the blend) and the
  // tables of the stores `builds_store` names, which are all it opens. FailedPrecondition where
  // DividedStores is empty.
  virtual Result<std::unique_ptr<BuiltOrder>> BuildShare(
      const std::function<bool(const std::string&)>& builds_store) const {
    (void)builds_store;
    return FailedPrecondition("this order's build is not divided among producers");
  }
  // Many producers of the whole image (--table-producers where every node holds the whole
  // image: orders without node images, or --node-window full): the units a build divides
  // into, each with its cost for PlanProducers (e.g. a store's index bytes, an epoch's
  // instances), in an order every rank derives from the options and files alone; empty where
  // one process builds it all (the default).
  virtual Result<std::vector<uint64_t>> WholeShareUnits() const { return std::vector<uint64_t>{}; }
  // One producer's share of a whole-image build: what every producer builds and the units
  // `builds_unit` names (indexes into WholeShareUnits). Its ShareFacts/AdoptShareFacts,
  // DataFacts, WholeSections and AssembleWholeImage then make the image (feed/ says in which
  // order). FailedPrecondition where WholeShareUnits is empty.
  virtual Result<std::unique_ptr<BuiltOrder>> BuildWholeShare(
      const std::function<bool(size_t unit)>& builds_unit) const {
    (void)builds_unit;
    return FailedPrecondition("this order's whole image is not divided among producers");
  }
  // A view into `image` (from this pipeline's ImageWriter), which must outlive it. DataLoss for
  // a damaged image. The token stores are not open yet.
  virtual Result<std::unique_ptr<OrderView>> ViewImage(std::span<const std::byte> image) const = 0;
  // What its samples are (field_schema.h): the feeder lays out, broadcasts and hands over
  // exactly these fields. Every rank knows it, readers or not; a view's packed() is
  // schema().packed().
  virtual FieldSchema schema() const = 0;

  // Resume and amendment policy. Called by the feeder (feed/) while it opens: amendable(),
  // StartHistory() and DescribeStageFrom() on every rank, cursor_bounded_by_split(),
  // ResumedHistory() and SamePast() on world rank 0 only (the feeder broadcasts what rank 0
  // decides). None is collective; all are const and thread safe. The defaults are an order
  // without a schedule history, which no amendment can change.

  // Whether the order keeps a schedule history in its checkpoints and may resume under an
  // amended schedule (checkpoint/resume_policy.h): then its token store digests are salted with
  // the canonical text without the schedule (checkpoint::WithoutScheduleText), so an amended
  // resume can compare them, and the history is broadcast from world rank 0 after a resume.
  virtual bool amendable() const { return false; }
  // The schedule history (JSON text, checkpoint::Cursor::schedule_history) of a run that starts
  // at `consumed` without a checkpoint; empty: the order has none.
  virtual std::string StartHistory(int64_t consumed) const;
  // The history after resuming at `resumed_at` from a checkpoint holding `saved_history` and
  // `saved_canonical` (its canonical text), accepted by checkpoint::CheckResume; `amended`:
  // accepted under another schedule (the order then logs that it was). Empty: none.
  virtual std::string ResumedHistory(const std::string& saved_history,
                                     const std::string& saved_canonical, int64_t resumed_at,
                                     bool amended) const;
  // Whether the order `before` (the saved run's options, this run's geometry) reads what
  // `image` (this pipeline's image of this run's tables) reads at positions [0, consumed):
  // Ok, or FailedPrecondition naming the first position that differs and why. Builds the saved
  // order's tables in process. The default (an order that cannot be amended) refuses.
  virtual Status SamePast(const config::JobOptions& before, std::span<const std::byte> image,
                          int64_t consumed) const;
  // Whether no run can have consumed more than the split's length (the sampler stops at its
  // end), so a checkpoint's cursor past it is refused; OLMo's order is sized for --train-iters,
  // so a later cursor there only means nothing is left to run. --dataloader-type cyclic is the
  // feeder's own matter.
  virtual bool cursor_bounded_by_split() const { return true; }
  // Names the stage whose tokens per sample change at `position` (a SeqLengths boundary), for
  // the feeder's error when no global batch of the run starts there.
  virtual std::string DescribeStageFrom(int64_t position) const;

  // Accounting. Called by audit/ (offline, one thread); not collective; const and thread safe.
  // The defaults are an order whose samples come from one top-level order without stages.

  // Whether each source's samples are a stream of its own (SampleRecord::dataset_sample from
  // 0, per source and seq length) that runs read exactly once up to their cursor, so an audit
  // proves each stream's samples [0, n) were read once.
  virtual bool source_streams() const { return false; }
  // Whether the train split is a schedule of stages with targets (Stages()).
  virtual bool staged() const { return false; }
  // The stages and targets of the train split (opens the sources' indexes). The default:
  // FailedPrecondition (no stages).
  virtual Result<StagePlan> Stages() const;
};

}  // namespace gridfeed::order
