// Every option of a gridfeed job in one structure, and the one table that describes each field
// once: flag (Megatron's name), YAML key, help, type, default and whether it decides the data
// order. Command-line and YAML registration (config/flags.h), the canonical text and its exact
// inverse (config/canonical.h) and validation (Validate below) are all derived from the table,
// so adding an option is one row here plus the code that consumes it.
// Values; thread-compatible. Knows nothing of MPI.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::config {

// The counts of Megatron's --per-dataset-sequences-path, keyed by prefix: {sequence count,
// document count}, the two counts of an .idx header (the document count is the number of
// document_indices entries, documents + 1, as Megatron's _IndexReader reads it).
using SequencesPerDataset = std::map<std::string, std::array<int64_t, 2>>;

// What decides the sample order (in the canonical text and the fingerprint). Defaults are
// Megatron's where Megatron has one.
struct DataOptions {
  std::vector<std::string> data_path;  // [W1] P1 [W2 P2 ...]
  std::vector<std::string> train_data_path;
  std::vector<std::string> valid_data_path;
  std::vector<std::string> test_data_path;
  // Megatron's many-file forms (config/data_args.h). --data-args-path and
  // --per-split-data-args-path are read once the options are given (LoadDataArgFiles, called by
  // OptionFlags) into data_path / train_data_path, valid_data_path, test_data_path, which alone
  // decide the order; the paths stay set to say where the lists came from.
  std::string data_args_path;
  std::string per_split_data_args_path;
  // A JSON file of {prefix: [sequence count, document count]}; its counts, read into
  // sequences_per_dataset, are checked against each index when the index is opened.
  std::string per_dataset_sequences_path;
  std::shared_ptr<const SequencesPerDataset> sequences_per_dataset;  // null: not read
  bool data_arg_files_read = false;  // LoadDataArgFiles ran (Validate refuses unread files)
  std::string split;                 // empty = Megatron's legacy "969, 30, 1"
  int64_t seq_length = 0;
  int64_t seed = 1234;
  std::string train_samples = "none";  // N or "none" (one epoch / exhaustive)
  std::string valid_samples = "none";
  std::string test_samples = "none";
  int64_t vocab_size = 0;  // informational; 0 = unknown
  int64_t eod_id = 0;
  int64_t pad_id = -1;  // -1 = none
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
  bool eod_mask_loss = false;
  bool create_attention_mask = false;
  bool no_add_extra_token = false;
  bool no_drop_last_partial_validation_sequence = false;
  double mid_level_dataset_surplus = 0.005;
  std::string dataloader_type = "single";  // single | cyclic (Megatron's samplers)
  bool no_data_sharding = false;           // cyclic: one permutation for all DP ranks
  // OLMo's order (order/olmo/olmo_pipeline.h), selected by olmo_paths; set from an OLMo training
  // YAML (config/olmo_yaml.h). seq_length, seed, eod_id and pad_id are shared with Megatron's.
  std::vector<std::string> olmo_paths;             // token files, in instance order
  std::vector<std::string> olmo_path_labels;       // data.datasets label per path (or empty)
  std::vector<std::string> olmo_label_mask_paths;  // one per path, or empty
  std::string olmo_memmap_dtype = "uint16";
  int64_t olmo_epoch = 0;  // the first epoch (shuffled with seed + epoch)
  // The OLMo seed as decimal text when it exceeds --seed's range (numpy takes any size; then
  // seed is 0); empty: the seed is `seed`.
  std::string olmo_seed;
  bool olmo_drop_last = false;
  int64_t olmo_num_workers = 0;  // DataLoader workers (the order of a partial tail)
  bool olmo_generate_attention_mask = false;
  bool olmo_generate_doc_lengths = false;
  bool olmo_instance_filter = false;  // the repetition filter (loss masked when it fails)
  int64_t olmo_repetition_max_period = 13;
  int64_t olmo_repetition_min_period = 1;
  int64_t olmo_repetition_max_count = 32;
  std::string olmo_pad_direction = "right";
  // A mixture schedule (config/mixture_schedule.h) as canonical JSON; selects the scheduled
  // order (order/mixture/mixture_pipeline.h). Empty: none.
  std::string mixture_schedule;
  // Megatron's SFT (order/sft/): JSON Lines conversations packed into THD sequences.
  bool sft = false;
  // The tokenizer SFT and FIM load (config/tokenizer_options.h; text/tokenizer_spec.h gives
  // each flag's meaning): Megatron's --tokenizer-model and --tokenizer-type with the flags the
  // type reads. --vocab-size (above) is NullTokenizer's and TikTokenizer's size.
  std::string tokenizer_model;   // a Hugging Face folder, gf_tokenizer.json, SentencePiece, ...
  std::string tokenizer_type;    // empty = detected from tokenizer_model
  std::string vocab_file;        // GPT2BPETokenizer's vocab.json
  std::string merge_file;        // GPT2BPETokenizer's merges.txt
  std::string tiktoken_pattern;  // TikTokenizer: v1 | v2; empty = v2
  int64_t tiktoken_num_special_tokens = 1000;
  std::vector<std::string> tokenizer_special_tokens;  // empty = not given
  std::string sft_tokenizer_prompt_format = "nemotron-h-aligned";
  // The CP size SFTDataset pads conversations for (to multiples of 2 x CP): the run's
  // --context-parallel-size (DeriveOptions), kept with the data so an audit, which has no grid,
  // packs as the run did. 0 = not derived yet (then the grid's).
  int64_t sft_context_parallel_size = 0;
  // Megatron's FIM (order/fim/): GPT tables, each sample rearranged into fill-in-the-middle
  // form on decoded text (--tokenizer-model, --special-tokens); Megatron's flags and defaults.
  bool fim_data = false;
  double fim_rate = 0.5;
  double fim_spm_rate = 0.5;
  std::string fim_split_sample;   // a token's spelling; empty = none
  double fim_fragment_rate = -1;  // -1 = none (required with fim_split_sample)
  std::string fim_no_prefix;      // empty = none
  std::string fim_prefix_token = "<fim_prefix>";
  std::string fim_middle_token = "<fim_middle>";
  std::string fim_suffix_token = "<fim_suffix>";
  std::string fim_pad_token = "<fim_pad>";
  std::string fim_eod_token = "<|endoftext|>";
  std::vector<std::string> special_tokens;  // Megatron's --special-tokens
  // Megatron's DataLoader workers per DP rank: FIM's random streams are one per worker.
  int64_t num_workers = 2;
  bool dataloader_inter_document_masking = false;  // FIM: cu_seqlens [0, L], max_seqlen L
  bool is_fim() const { return fim_data; }
  bool is_sft() const { return sft; }
  bool is_olmo() const { return !olmo_paths.empty(); }
  bool is_mixture() const { return !mixture_schedule.empty(); }
};

struct GridOptions {
  int64_t tensor_model_parallel_size = 1;
  int64_t pipeline_model_parallel_size = 1;
  int64_t context_parallel_size = 1;
  int64_t data_parallel_size = 0;  // 0 = world size / (TP x PP x CP)
  std::string rank_order = "tp-cp-ep-dp-pp";
};

struct BatchOptions {
  int64_t micro_batch_size = 1;
  int64_t global_batch_size = 0;  // 0 = micro-batch size x DP
  // OLMo's device_train_batch_size when given: must equal global / DP (checked, not used).
  int64_t device_train_batch_size = 0;
};

struct ResumeOptions {
  std::string resume_from;  // a gridfeed HDF5 checkpoint
  bool allow_batch_size_change = false;
  // Resume with another mixture schedule when the order up to the cursor is identical.
  bool allow_schedule_change = false;
  int64_t consumed_samples = 0;  // start as if resumed here (global samples)
};

struct FeedOptions {
  std::string split_name = "train";  // which split a run reads
  // What a node's table window holds: "reads" (the samples its readers read from the cursor
  // on: order/node_image.h), "full" (the whole image), "auto" (reads on several nodes).
  std::string node_window = "auto";
  // Who builds the tables of node images: "auto" (the node leaders, on several nodes) or N
  // producers (1 = world rank 0 alone), bounded by the nodes. See order/node_image.h.
  std::string table_producers = "auto";
  int64_t prefetch_depth = 4;           // micro-batches assembled ahead on each reader
  bool device_broadcast = false;        // TP broadcast over NCCL from GPU memory
  int64_t testing_fail_open_rank = -1;  // tests only: this world rank fails to open its stores
  // Tests only: a reader assembling this position of the split read fails with an IoError (the
  // read path's error channel); -1 = off.
  int64_t testing_fail_read_position = -1;
  // Tests only, on one machine: split the ranks into simulated nodes of this many consecutive
  // world ranks (their own shared windows and leaders); 0 = the real nodes.
  int64_t testing_ranks_per_node = 0;
  // Tests only: the leader of this node (world rank / testing_ranks_per_node, else the leader's
  // index among the leaders) flips a byte of its image after the broadcast; -1 = off.
  int64_t testing_corrupt_image_node = -1;
  // Tests only: producer N (--table-producers; its rank among the leaders) fails its share of
  // the build, or changes a byte of its sections after their digest; -1 = off.
  int64_t testing_fail_producer = -1;
  int64_t testing_corrupt_sections_producer = -1;
  // Tests only: producer N dies (SIGKILL) in the middle of its share; -1 = off.
  int64_t testing_kill_producer = -1;
  // Tests only: world rank 0 fails to make this node's image (--node-window; node numbers as
  // SharedImage's: 0 = world rank 0's node); -1 = off.
  int64_t testing_fail_node_image = -1;
  // Tests only: the leader of this node (not world rank 0's) fails as if its receive of the
  // node's image size had failed; -1 = off.
  int64_t testing_fail_node_receive = -1;
  // Tests only: world rank 0's send of the image to this node's leader (leaders in order, not
  // world rank 0's node) fails: the job must end (MPI_Abort), not hang; -1 = off.
  int64_t testing_fail_node_send = -1;
  // Tests only: device_broadcast moves the payload through host memory over MPI instead of
  // CUDA/NCCL (the same feeder code path, without a GPU).
  bool testing_device_loopback = false;
};

// What a training loop (gridfeed run, the toy trainer) does with the feeder.
struct RunOptions {
  int64_t train_iters = 10;
  int64_t save_interval = 0;  // iterations between checkpoints; 0 = only at the end
  std::string ledger;         // folder of the per-DP-rank ledger files
  // A run that does not resume may replace a non-empty ledger folder (refused otherwise).
  bool overwrite_ledger = false;
};

struct JobOptions {
  DataOptions data;
  GridOptions grid;
  BatchOptions batch;
  ResumeOptions resume;
  FeedOptions feed;
  RunOptions run;
};

enum class Group : unsigned {
  kData = 1,
  kGrid = 2,
  kBatch = 4,
  kResume = 8,
  kFeed = 16,
  kRun = 32,
  kSplitName = 64,  // which split a command reads
};
// A set of groups, e.g. Groups{Group::kData, Group::kSplitName}.
class Groups {
 public:
  constexpr Groups(std::initializer_list<Group> groups) {
    for (Group g : groups) bits_ |= static_cast<unsigned>(g);
  }
  static constexpr Groups All() {
    return {Group::kData, Group::kGrid, Group::kBatch,    Group::kResume,
            Group::kFeed, Group::kRun,  Group::kSplitName};
  }
  constexpr bool Has(Group g) const { return (bits_ & static_cast<unsigned>(g)) != 0; }

 private:
  unsigned bits_ = 0;
};

// How a field enters the canonical text (the fingerprint of the data order).
enum class Canonical {
  kNo,             // does not change the order
  kAlways,         // always written (fields of the first ledger/checkpoint format)
  kUnlessDefault,  // written only when set, so older fingerprints stay valid
  kFimOnly,        // as kUnlessDefault, for --fim-data orders only (others do not depend on it)
};

using FieldRef = std::variant<int64_t*, double*, bool*, std::string*, std::vector<std::string>*>;

struct OptionRow {
  const char* name;  // flag without "--" = YAML key = canonical key (unless canonical_name)
  Group group;
  Canonical canonical;
  const char* help;
  FieldRef (*field)(JobOptions&);
  std::vector<std::string> choices = {};  // allowed values of a string field (empty: any)
  // Canonical spelling of each choice where it differs (same order as choices; empty: same).
  std::vector<std::string> canonical_choices = {};
  const char* canonical_name = nullptr;
  bool hidden = false;  // testing options: not in --help
  std::string flag() const { return std::string("--") + name; }
  const char* key() const { return canonical_name ? canonical_name : name; }
};

// The table, in help order.
std::span<const OptionRow> OptionTable();
// The row named `name` (flag without dashes), or nullptr.
const OptionRow* FindRow(const std::string& name);

// Reads a field through a row (const access for printing and comparing).
FieldRef Get(const OptionRow& row, const JobOptions& o);
// The field's value as text (lists joined by spaces), for messages and --help defaults.
std::string ValueText(const OptionRow& row, const JobOptions& o);
bool SameValue(const OptionRow& row, const JobOptions& a, const JobOptions& b);
// Copies one field from `from` into `to`.
void CopyField(const OptionRow& row, const JobOptions& from, JobOptions* to);

// Fills the options derived from others (SFT's packing CP size from --context-parallel-size).
// Every way of making options calls it once the given ones are set (flags, YAML, Python).
void DeriveOptions(JobOptions* o);

// Checks that need no world: every number in range (overflow-safe), choices, counts parse.
// InvalidArgument names the flag.
Status Validate(const JobOptions& o);
// The part of Validate done row by row (option_table.cc): no value holds a NUL character; a
// row with choices holds one of them.
Status ValidateRowValues(const JobOptions& o);
// Checks against the world size; returns the data-parallel size.
Result<int64_t> ValidateGrid(const JobOptions& o, int64_t world_size);
// The micro-batch size the feeder reads at DP size `dp`: --micro-batch-size, except for an OLMo
// order, where it is OLMo's chunk of a device batch (config/olmo_yaml.h: OlmoFeederMicroBatch).
int64_t FeederMicroBatchSize(const JobOptions& o, int64_t dp);
// --device-train-batch-size (OLMo's device_train_batch_size), when given, equals global batch /
// DP: the one check, used by ValidateGrid and by OLMo's order wherever the DP size is known.
Status CheckDeviceTrainBatchSize(const JobOptions& o, int64_t dp);

// "none" -> -1, else a non-negative integer without overflow. InvalidArgument names the flag.
Result<int64_t> ParseSampleCount(const std::string& flag, const std::string& value);
// --table-producers: how many producers build the node images with `num_nodes` nodes (1 = world
// rank 0 alone); InvalidArgument for a value that is not "auto" or a count in [1, 2^20].
Result<int> TableProducers(const FeedOptions& feed, int num_nodes);
// Every option as text (sorted keys), for the start-up agreement: equal text = equal options.
std::string AgreementText(const JobOptions& o);
// The first option whose value in `o` differs from the one `reference` (an AgreementText) holds,
// as "--seed is 99 here, 1234 in the reference"; empty when none differs.
std::string DescribeDifference(const std::string& reference, const JobOptions& o);

}  // namespace gridfeed::config
