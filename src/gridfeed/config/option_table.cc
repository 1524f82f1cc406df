// The option table: every option's row (flag, group, help, field) and what is done row by row
// (values as text, comparison, copying, the agreement text and its differences, the rows' own
// checks).
#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "gridfeed/config/options.h"

namespace gridfeed::config {
namespace {

#define GF_FIELD(member) [](JobOptions& o) -> FieldRef { return &o.member; }

const std::vector<OptionRow>& Table() {
  using G = Group;
  using C = Canonical;
  static const std::vector<OptionRow> rows = {
      // Data: the order (Megatron's flag names).
      {"data-path", G::kData, C::kAlways, "[W1] PREFIX1 [W2 PREFIX2 ...]",
       GF_FIELD(data.data_path)},
      {"train-data-path", G::kData, C::kAlways, "Per-split blend for train",
       GF_FIELD(data.train_data_path)},
      {"valid-data-path", G::kData, C::kAlways, "Per-split blend for valid",
       GF_FIELD(data.valid_data_path)},
      {"test-data-path", G::kData, C::kAlways, "Per-split blend for test",
       GF_FIELD(data.test_data_path)},
      // Megatron's many-file forms (config/data_args.h): read into the lists above, which
      // alone enter the canonical text.
      {"data-args-path", G::kData, C::kNo,
       "A text file holding the --data-path list (W1 P1 W2 P2 ..., whitespace separated)",
       GF_FIELD(data.data_args_path)},
      {"per-split-data-args-path", G::kData, C::kNo,
       "A JSON file {\"train\": [...], \"valid\": [...], \"test\": [...]} of per-split lists",
       GF_FIELD(data.per_split_data_args_path)},
      {"per-dataset-sequences-path", G::kData, C::kNo,
       "A JSON file {PREFIX: [sequence count, document count]}, checked against each index "
       "(gridfeed inspect --per-dataset-sequences-out writes it)",
       GF_FIELD(data.per_dataset_sequences_path)},
      {"split", G::kData, C::kAlways, "Split weights, e.g. 969,30,1 (default: 969, 30, 1)",
       GF_FIELD(data.split)},
      {"seq-length", G::kData, C::kAlways, "Sequence length in tokens (required)",
       GF_FIELD(data.seq_length)},
      {"seed", G::kData, C::kAlways, "Random seed", GF_FIELD(data.seed)},
      {"train-samples", G::kData, C::kAlways, "N or none", GF_FIELD(data.train_samples)},
      {"valid-samples", G::kData, C::kAlways, "N or none", GF_FIELD(data.valid_samples)},
      {"test-samples", G::kData, C::kAlways, "N or none", GF_FIELD(data.test_samples)},
      {"vocab-size", G::kData, C::kAlways,
       "Vocabulary size (0 = unknown); NullTokenizer's and TikTokenizer's size",
       GF_FIELD(data.vocab_size)},
      {"eod-id", G::kData, C::kAlways, "End-of-document token id", GF_FIELD(data.eod_id)},
      {"pad-id", G::kData, C::kAlways, "Pad token id (-1 = none)", GF_FIELD(data.pad_id)},
      {"reset-position-ids", G::kData, C::kAlways, "Restart positions after EOD",
       GF_FIELD(data.reset_position_ids)},
      {"reset-attention-mask", G::kData, C::kAlways, "Mask attention across EOD",
       GF_FIELD(data.reset_attention_mask)},
      {"eod-mask-loss", G::kData, C::kAlways, "No loss on EOD input tokens",
       GF_FIELD(data.eod_mask_loss)},
      {"create-attention-mask", G::kData, C::kAlways, "Build attention masks",
       GF_FIELD(data.create_attention_mask)},
      {"no-add-extra-token", G::kData, C::kAlways, "Samples of seq_length tokens (labels rotated)",
       GF_FIELD(data.no_add_extra_token)},
      {"no-drop-last-partial-validation-sequence", G::kData, C::kAlways,
       "Keep a padded last valid sample", GF_FIELD(data.no_drop_last_partial_validation_sequence)},
      {"mid-level-dataset-surplus", G::kData, C::kAlways, "Extra samples per blend source",
       GF_FIELD(data.mid_level_dataset_surplus)},
      // Megatron's sampler; the first ledger format called it "sampler": "pretraining".
      {"dataloader-type",
       G::kData,
       C::kAlways,
       "single (each sample once, in order) or cyclic (reshuffled every epoch)",
       GF_FIELD(data.dataloader_type),
       {"single", "cyclic"},
       {"pretraining", "cyclic"},
       "sampler"},
      {"no-data-sharding", G::kData, C::kUnlessDefault,
       "cyclic: one permutation strided over DP ranks instead of a bucket per rank",
       GF_FIELD(data.no_data_sharding)},
      // OLMo's order; an OLMo training YAML sets these (config/olmo_yaml.h).
      {"olmo-paths", G::kData, C::kUnlessDefault,
       "OLMo token files (raw uint16/uint32 arrays) in instance order: selects OLMo's order",
       GF_FIELD(data.olmo_paths)},
      {"olmo-path-labels", G::kData, C::kUnlessDefault,
       "The data.datasets label of each OLMo path (accounting)", GF_FIELD(data.olmo_path_labels)},
      {"olmo-label-mask-paths", G::kData, C::kUnlessDefault,
       "OLMo label-mask files, one per token file", GF_FIELD(data.olmo_label_mask_paths)},
      {"olmo-memmap-dtype",
       G::kData,
       C::kUnlessDefault,
       "Token type of the OLMo files",
       GF_FIELD(data.olmo_memmap_dtype),
       {"uint16", "uint32"}},
      {"olmo-epoch", G::kData, C::kUnlessDefault, "OLMo: the first epoch (seed + epoch shuffles)",
       GF_FIELD(data.olmo_epoch)},
      {"olmo-seed", G::kData, C::kUnlessDefault,
       "OLMo: a seed beyond --seed's range (decimal, any size; an OLMo YAML's seed sets it)",
       GF_FIELD(data.olmo_seed)},
      {"olmo-drop-last", G::kData, C::kUnlessDefault,
       "OLMo: truncate the global order to a multiple of DP and drop partial batches",
       GF_FIELD(data.olmo_drop_last)},
      {"olmo-num-workers", G::kData, C::kUnlessDefault,
       "OLMo: DataLoader workers (decide the order of a partial epoch tail)",
       GF_FIELD(data.olmo_num_workers)},
      {"olmo-generate-attention-mask", G::kData, C::kUnlessDefault,
       "OLMo: no loss where the input is the pad id", GF_FIELD(data.olmo_generate_attention_mask)},
      {"olmo-generate-doc-lengths", G::kData, C::kUnlessDefault,
       "OLMo: document lengths from EOS (requires --eod-id)",
       GF_FIELD(data.olmo_generate_doc_lengths)},
      {"olmo-instance-filter", G::kData, C::kUnlessDefault,
       "OLMo: the repetition filter (no loss on instances it rejects)",
       GF_FIELD(data.olmo_instance_filter)},
      {"olmo-repetition-max-period", G::kData, C::kUnlessDefault, "OLMo filter: longest period",
       GF_FIELD(data.olmo_repetition_max_period)},
      {"olmo-repetition-min-period", G::kData, C::kUnlessDefault, "OLMo filter: shortest period",
       GF_FIELD(data.olmo_repetition_min_period)},
      {"olmo-repetition-max-count", G::kData, C::kUnlessDefault,
       "OLMo filter: repetitions that reject an instance",
       GF_FIELD(data.olmo_repetition_max_count)},
      {"olmo-pad-direction",
       G::kData,
       C::kNo,
       "OLMo collator padding (instances have one length, so nothing is padded)",
       GF_FIELD(data.olmo_pad_direction),
       {"right", "left"}},
      // A scheduled mixture; a config's sources/schedule/max_epochs keys set it.
      {"mixture-schedule", G::kData, C::kUnlessDefault,
       "Mixture schedule as JSON (a YAML config's sources/schedule/max_epochs set it)",
       GF_FIELD(data.mixture_schedule)},
      // Megatron's SFT: --data-path names JSON Lines files of conversations.
      {"sft", G::kData, C::kUnlessDefault,
       "Megatron's SFT: --data-path names JSON Lines conversations, packed into THD sequences",
       GF_FIELD(data.sft)},
      // The tokenizer of SFT and FIM (Megatron's flags; text/tokenizer_spec.h): it decides
      // their samples, so each enters the canonical text when set.
      {"tokenizer-model", G::kData, C::kUnlessDefault,
       "SFT/FIM: a Hugging Face folder (tokenizer.json), a gf_tokenizer.json or its folder, a "
       "SentencePiece model, or TikTokenizer's vocabulary",
       GF_FIELD(data.tokenizer_model)},
      {"tokenizer-type", G::kData, C::kUnlessDefault,
       "SFT/FIM: Megatron's tokenizer type: HuggingFaceTokenizer, GPT2BPETokenizer, "
       "TikTokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer, "
       "NullTokenizer (default: detected from --tokenizer-model)",
       GF_FIELD(data.tokenizer_type)},
      {"vocab-file", G::kData, C::kUnlessDefault, "GPT2BPETokenizer: vocab.json",
       GF_FIELD(data.vocab_file)},
      {"merge-file", G::kData, C::kUnlessDefault, "GPT2BPETokenizer: merges.txt",
       GF_FIELD(data.merge_file)},
      {"tiktoken-pattern", G::kData, C::kUnlessDefault,
       "TikTokenizer: the split pattern, v1 or v2 (empty: v2)", GF_FIELD(data.tiktoken_pattern)},
      {"tiktoken-num-special-tokens", G::kData, C::kUnlessDefault,
       "TikTokenizer: ids below this are special tokens",
       GF_FIELD(data.tiktoken_num_special_tokens)},
      {"tokenizer-special-tokens", G::kData, C::kUnlessDefault,
       "TikTokenizer's special tokens (default <unk> <s> </s> <mask> <pad> <cls> <sep>); the "
       "additional special tokens of HuggingFaceTokenizer / GPT2BPETokenizer",
       GF_FIELD(data.tokenizer_special_tokens)},
      {"sft-tokenizer-prompt-format",
       G::kData,
       C::kUnlessDefault,
       "SFT: how a conversation is rendered to text (default: the tokenizer's chat template)",
       GF_FIELD(data.sft_tokenizer_prompt_format),
       {"nemotron-h-aligned", "nemotron-nano-v2", "identity", "default"}},
      {"sft-context-parallel-size",
       G::kData,
       C::kUnlessDefault,
       "SFT: the CP size packing pads for (derived from --context-parallel-size)",
       GF_FIELD(data.sft_context_parallel_size),
       {},
       {},
       nullptr,
       /*hidden=*/true},
      // Megatron's FIM (--fim-data): GPT tables, samples in fill-in-the-middle form.
      {"fim-data", G::kData, C::kUnlessDefault,
       "Megatron's FIM: GPT samples rearranged into prefix/suffix/middle (needs --tokenizer-model)",
       GF_FIELD(data.fim_data)},
      {"num-workers", G::kData, C::kFimOnly,
       "Megatron's DataLoader workers per DP rank; only FIM samples depend on it (one random "
       "stream per worker, worker w fetching micro-batches w, w + W, ...; 0: one stream)",
       GF_FIELD(data.num_workers)},
      {"fim-rate", G::kData, C::kUnlessDefault, "FIM: probability of a FIM permutation",
       GF_FIELD(data.fim_rate)},
      {"fim-spm-rate", G::kData, C::kUnlessDefault, "FIM: probability of SPM (else PSM)",
       GF_FIELD(data.fim_spm_rate)},
      {"fim-split-sample", G::kData, C::kUnlessDefault,
       "FIM: token (spelling) that splits a sample into fragments (empty: none)",
       GF_FIELD(data.fim_split_sample)},
      {"fim-fragment-rate", G::kData, C::kUnlessDefault,
       "FIM: permutation probability of each fragment (-1: none; needed with --fim-split-sample)",
       GF_FIELD(data.fim_fragment_rate)},
      {"fim-no-prefix", G::kData, C::kUnlessDefault,
       "FIM: decoded text starting with this is not permuted (empty: none)",
       GF_FIELD(data.fim_no_prefix)},
      {"fim-prefix-token", G::kData, C::kUnlessDefault, "FIM: prefix token",
       GF_FIELD(data.fim_prefix_token)},
      {"fim-middle-token", G::kData, C::kUnlessDefault, "FIM: middle token",
       GF_FIELD(data.fim_middle_token)},
      {"fim-suffix-token", G::kData, C::kUnlessDefault, "FIM: suffix token",
       GF_FIELD(data.fim_suffix_token)},
      {"fim-pad-token", G::kData, C::kUnlessDefault, "FIM: pad token (fills a short result)",
       GF_FIELD(data.fim_pad_token)},
      {"fim-eod-token", G::kData, C::kUnlessDefault, "FIM: the token FIM segments documents at",
       GF_FIELD(data.fim_eod_token)},
      {"special-tokens", G::kData, C::kUnlessDefault,
       "Token names the tokenizer counts as special (Megatron's --special-tokens)",
       GF_FIELD(data.special_tokens)},
      {"dataloader-inter-document-masking", G::kData, C::kUnlessDefault,
       "FIM: cu_seqlens/max_seqlen in samples (one sequence of L tokens, as GPTFIMDataset)",
       GF_FIELD(data.dataloader_inter_document_masking)},
      // Grid.
      {"tensor-model-parallel-size", G::kGrid, C::kNo, "TP size",
       GF_FIELD(grid.tensor_model_parallel_size)},
      {"pipeline-model-parallel-size", G::kGrid, C::kNo, "PP size",
       GF_FIELD(grid.pipeline_model_parallel_size)},
      {"context-parallel-size", G::kGrid, C::kNo, "CP size", GF_FIELD(grid.context_parallel_size)},
      {"data-parallel-size", G::kGrid, C::kNo,
       "DP size (0 = world size / (TP x PP x CP); offline tools need it)",
       GF_FIELD(grid.data_parallel_size)},
      {"rank-order", G::kGrid, C::kNo, "Megatron's rank order (tp fastest by default)",
       GF_FIELD(grid.rank_order)},
      // Batch.
      {"micro-batch-size", G::kBatch, C::kNo, "Samples per micro-batch per DP rank",
       GF_FIELD(batch.micro_batch_size)},
      {"global-batch-size", G::kBatch, C::kNo, "Samples per iteration (0 = micro-batch x DP)",
       GF_FIELD(batch.global_batch_size)},
      {"device-train-batch-size", G::kBatch, C::kNo,
       "OLMo's per-DP-rank batch: checked to equal global / DP (0 = not given)",
       GF_FIELD(batch.device_train_batch_size)},
      // Resume.
      {"resume", G::kResume, C::kNo, "Continue from this gridfeed checkpoint (HDF5)",
       GF_FIELD(resume.resume_from)},
      {"allow-batch-size-change", G::kResume, C::kNo,
       "Resume with another global batch size from the same global sample",
       GF_FIELD(resume.allow_batch_size_change)},
      {"allow-schedule-change", G::kResume, C::kNo,
       "Resume with an amended mixture schedule if the order up to the cursor is unchanged",
       GF_FIELD(resume.allow_schedule_change)},
      {"consumed-samples", G::kResume, C::kNo, "Start as if resumed at this global sample",
       GF_FIELD(resume.consumed_samples)},
      // Feed.
      {"split-name",
       G::kSplitName,
       C::kNo,
       "The split to read: train, valid or test",
       GF_FIELD(feed.split_name),
       {"train", "valid", "test"}},
      {"node-window",
       G::kFeed,
       C::kNo,
       "What each node's shared table window holds: reads (only the samples its readers read "
       "from the cursor on), full (the whole order) or auto (reads on several nodes)",
       GF_FIELD(feed.node_window),
       {"auto", "full", "reads"}},
      {"table-producers", G::kFeed, C::kNo,
       "Who builds the tables: auto (every node's leader, on several nodes) or N producers (1: "
       "world rank 0 alone), each a share of the stores (an OLMo order: of the epochs); the "
       "images are the same either way",
       GF_FIELD(feed.table_producers)},
      {"prefetch-depth", G::kFeed, C::kNo, "Micro-batches assembled ahead on each reader",
       GF_FIELD(feed.prefetch_depth)},
      {"device-broadcast", G::kFeed, C::kNo, "TP broadcast from GPU memory over NCCL",
       GF_FIELD(feed.device_broadcast)},
      {"testing-fail-open-rank",
       G::kFeed,
       C::kNo,
       "tests only",
       GF_FIELD(feed.testing_fail_open_rank),
       {},
       {},
       nullptr,
       true},
      {"testing-fail-read-position",
       G::kFeed,
       C::kNo,
       "tests only: reading this position fails on its readers (-1 = off)",
       GF_FIELD(feed.testing_fail_read_position),
       {},
       {},
       nullptr,
       true},
      {"testing-fail-producer",
       G::kFeed,
       C::kNo,
       "tests only: this table producer fails its share of the build (-1 = off)",
       GF_FIELD(feed.testing_fail_producer),
       {},
       {},
       nullptr,
       true},
      {"testing-corrupt-sections-producer",
       G::kFeed,
       C::kNo,
       "tests only: this table producer changes its sections after their digest (-1 = off)",
       GF_FIELD(feed.testing_corrupt_sections_producer),
       {},
       {},
       nullptr,
       true},
      {"testing-kill-producer",
       G::kFeed,
       C::kNo,
       "tests only: this table producer dies (SIGKILL) in the middle of its share (-1 = off)",
       GF_FIELD(feed.testing_kill_producer),
       {},
       {},
       nullptr,
       true},
      {"testing-ranks-per-node",
       G::kFeed,
       C::kNo,
       "tests only: simulated nodes of N consecutive ranks (0 = real nodes)",
       GF_FIELD(feed.testing_ranks_per_node),
       {},
       {},
       nullptr,
       true},
      {"testing-corrupt-image-node",
       G::kFeed,
       C::kNo,
       "tests only: this node's leader corrupts its table image (-1 = off)",
       GF_FIELD(feed.testing_corrupt_image_node),
       {},
       {},
       nullptr,
       true},
      {"testing-fail-node-image",
       G::kFeed,
       C::kNo,
       "tests only: world rank 0 fails to make this node's window image (-1 = off)",
       GF_FIELD(feed.testing_fail_node_image),
       {},
       {},
       nullptr,
       true},
      {"testing-fail-node-receive",
       G::kFeed,
       C::kNo,
       "tests only: this node's leader fails receiving its window size (-1 = off)",
       GF_FIELD(feed.testing_fail_node_receive),
       {},
       {},
       nullptr,
       true},
      {"testing-fail-node-send",
       G::kFeed,
       C::kNo,
       "tests only: world rank 0 fails sending this node's leader its image (-1 = off)",
       GF_FIELD(feed.testing_fail_node_send),
       {},
       {},
       nullptr,
       true},
      {"testing-device-loopback",
       G::kFeed,
       C::kNo,
       "tests only: --device-broadcast through host memory over MPI",
       GF_FIELD(feed.testing_device_loopback),
       {},
       {},
       nullptr,
       true},
      // Run.
      {"train-iters", G::kRun, C::kNo, "Iterations to run", GF_FIELD(run.train_iters)},
      {"save-interval", G::kRun, C::kNo, "Iterations between checkpoints (0 = at the end only)",
       GF_FIELD(run.save_interval)},
      {"ledger", G::kRun, C::kNo, "Append one record per sample to DIR/dp<r>.tsv",
       GF_FIELD(run.ledger)},
      {"overwrite-ledger", G::kRun, C::kNo,
       "A run without --resume replaces what the --ledger folder holds (refused otherwise)",
       GF_FIELD(run.overwrite_ledger)},
  };
  return rows;
}

#undef GF_FIELD

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

template <typename T>
T& At(const OptionRow& row, const JobOptions& o) {
  return *std::get<T*>(Get(row, o));
}

}  // namespace

std::span<const OptionRow> OptionTable() { return Table(); }

const OptionRow* FindRow(const std::string& name) {
  for (const auto& r : Table()) {
    if (name == r.name) return &r;
  }
  return nullptr;
}

FieldRef Get(const OptionRow& row, const JobOptions& o) {
  return row.field(const_cast<JobOptions&>(o));  // read-only use by the callers
}

std::string ValueText(const OptionRow& row, const JobOptions& o) {
  return std::visit(
      [](auto* p) -> std::string {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return *p;
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          return Join(*p);
        } else if constexpr (std::is_same_v<T, bool>) {
          return *p ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          return nlohmann::json(*p).dump();
        } else {
          return std::to_string(*p);
        }
      },
      Get(row, o));
}

bool SameValue(const OptionRow& row, const JobOptions& a, const JobOptions& b) {
  return std::visit(
      [&](auto* pa) {
        using P = decltype(pa);
        const auto* pb = std::get<P>(Get(row, b));
        if constexpr (std::is_same_v<P, double*>) {  // NaN equals NaN here (same text)
          return std::memcmp(pa, pb, sizeof(double)) == 0;
        } else {
          return *pa == *pb;
        }
      },
      Get(row, a));
}

void CopyField(const OptionRow& row, const JobOptions& from, JobOptions* to) {
  std::visit([&](auto* dst) { *dst = *std::get<decltype(dst)>(Get(row, from)); }, row.field(*to));
}

Status ValidateRowValues(const JobOptions& o) {
  // A NUL (possible from YAML's "\0") would cut a path short where the C library sees it: the
  // file written or read would be another than the one named.
  for (const auto& row : Table()) {
    const FieldRef f = Get(row, o);
    bool nul = false;
    if (const auto* s = std::get_if<std::string*>(&f)) nul = (*s)->find('\0') != std::string::npos;
    if (const auto* v = std::get_if<std::vector<std::string>*>(&f)) {
      for (const auto& x : **v) nul = nul || x.find('\0') != std::string::npos;
    }
    if (nul) return InvalidArgument(row.flag() + " holds a NUL character");
  }
  for (const auto& row : Table()) {
    if (row.choices.empty()) continue;
    const std::string& v = At<std::string>(row, o);
    if (std::find(row.choices.begin(), row.choices.end(), v) == row.choices.end()) {
      return InvalidArgument(row.flag() + " must be one of " + Join(row.choices) + ", got '" + v +
                             "'");
    }
  }
  return Status::Ok();
}

std::string AgreementText(const JobOptions& o) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& row : Table()) j[row.name] = ValueText(row, o);
  return j.dump();
}

std::string DescribeDifference(const std::string& reference, const JobOptions& o) {
  const nlohmann::json ref = nlohmann::json::parse(reference, nullptr, false);
  for (const auto& row : Table()) {
    const std::string mine = ValueText(row, o);
    if (!ref.is_object() || !ref.contains(row.name) || !ref[row.name].is_string()) {
      return row.flag() + " is '" + mine + "' here, absent in the reference";
    }
    const std::string theirs = ref[row.name].get<std::string>();
    if (theirs != mine) {
      return row.flag() + " is '" + mine + "' here, '" + theirs + "' in the reference";
    }
  }
  return "";
}

}  // namespace gridfeed::config
