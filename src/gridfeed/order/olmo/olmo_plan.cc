// OLMo's order geometry (olmo_plan.h, olmo_pipeline.h): the plan from the options and the
// token files' sizes, and where a position is read.
#include "gridfeed/order/olmo/olmo_plan.h"

#include <algorithm>
#include <limits>
#include <string>

#include "gridfeed/config/olmo_yaml.h"

namespace gridfeed::order {
namespace {

constexpr int64_t kMaxEpochs = int64_t{1} << 16;

// Instances rank `rank` reads in the epoch a restart begins in: OLMo's g[s:][rank::W] of the
// epoch's total_size entries, the DataLoader dropping partial batches with drop_last.
int64_t RestartLength(int64_t total, int64_t start, int64_t rank, int64_t world_size) {
  const int64_t left = total - start - rank;
  return left > 0 ? (left + world_size - 1) / world_size : 0;
}
int64_t Emitted(int64_t len, int64_t b, bool drop_last) { return drop_last ? len / b * b : len; }

}  // namespace

namespace olmo_plan {

// Sources for accounting: data.datasets labels, else the paths (a repeated path is one source).
void AssignSources(const config::DataOptions& d, OlmoPlan* plan) {
  const auto& names = d.olmo_path_labels.empty() ? d.olmo_paths : d.olmo_path_labels;
  plan->file_source.clear();
  plan->source_names.clear();
  for (const auto& name : names) {
    auto it = std::find(plan->source_names.begin(), plan->source_names.end(), name);
    if (it == plan->source_names.end()) {
      plan->source_names.push_back(name);
      it = plan->source_names.end() - 1;
    }
    plan->file_source.push_back(static_cast<int>(it - plan->source_names.begin()));
  }
}

// The geometry without the files: what the image header restores.
Status FinishPlan(const config::JobOptions& o, OlmoPlan* p) {
  GRIDFEED_ASSIGN_OR_RETURN(
      p->sizes, OlmoSizesFor(p->instances, p->world_size, p->global_batch_size, p->drop_last));
  const int64_t b = p->sizes.device_batch_size;
  GRIDFEED_RETURN_IF_ERROR(config::CheckDeviceTrainBatchSize(o, p->world_size));
  // OLMo's chunks of at most device_train_microbatch_size; the order does not depend on it.
  p->micro_batch_size = config::OlmoFeederMicroBatch(p->micro_batch_size, b);
  if (o.data.olmo_seed.empty()) {
    p->seed = SeedWordsOf(static_cast<uint64_t>(o.data.seed));
  } else {
    auto seed = ParseSeedWords(o.data.olmo_seed);
    if (!seed.ok()) return seed.status().WithContext("--olmo-seed");
    p->seed = std::move(seed).value();
  }
  const int64_t ns = p->sizes.num_samples;
  p->epoch_stream = p->drop_last ? b * (ns / b) : ns;
  if (p->epoch_stream == 0) {
    return FailedPrecondition(
        "OLMo's global order is empty: " + std::to_string(p->instances) + " instances of " +
        std::to_string(o.data.seq_length) + " tokens for DP " + std::to_string(p->world_size) +
        (p->drop_last ? " with data.drop_last (device batch " + std::to_string(b) + ")" : "") +
        " (OLMo itself fails here writing an empty global_indices.npy)");
  }
  // A start at --consumed-samples c is OLMo's restart: c = whole epochs (epoch_stream x W
  // instances each) + start_index s in the next one.
  const int64_t per_epoch = p->epoch_stream * p->world_size;  // below 2^32 x 2^24
  p->restart = o.resume.consumed_samples;
  p->restart_epoch = p->restart / per_epoch;
  p->start_index = p->restart % per_epoch;
  // Enough epochs for --train-iters whole global batches per DP rank after the start (both
  // below 2^40 and 2^62: no overflow).
  const int64_t iters = std::max<int64_t>(1, o.run.train_iters);
  if (iters > (std::numeric_limits<int64_t>::max() / 4) / b) {
    return InvalidArgument("--train-iters " + std::to_string(iters) + " is too large");
  }
  const int64_t first_left =  // the fewest any rank reads in the start's epoch (the last rank)
      Emitted(RestartLength(p->sizes.total_size, p->start_index, p->world_size - 1, p->world_size),
              b, p->drop_last);
  const int64_t more = std::max<int64_t>(0, iters * b - first_left);
  p->epochs = p->restart_epoch + 1 + (more + p->epoch_stream - 1) / p->epoch_stream;
  if (p->epochs > kMaxEpochs) {
    return InvalidArgument("--train-iters " + std::to_string(iters) + " after --consumed-samples " +
                           std::to_string(p->restart) + " needs " + std::to_string(p->epochs) +
                           " OLMo epochs (at most " + std::to_string(kMaxEpochs) + ")");
  }
  // Whole micro-steps after the start (which may lie inside a global batch).
  const int64_t mbs = p->micro_batch_size;
  const int64_t per_rank = first_left + (p->epochs - p->restart_epoch - 1) * p->epoch_stream;
  p->length = p->restart + per_rank / mbs * mbs * p->world_size;
  return Status::Ok();
}

// The plan's geometry from the options alone, files excepted.
OlmoPlan GeometryOf(const config::JobOptions& o) {
  OlmoPlan p;
  const auto& d = o.data;
  p.world_size = std::max<int64_t>(1, o.grid.data_parallel_size);
  // An offline tool without --data-parallel-size: OLMo's device_train_batch_size (global / W)
  // names W (a run always knows its DP size; a mismatch is refused by FinishPlan).
  const int64_t device = o.batch.device_train_batch_size, gbs = o.batch.global_batch_size;
  if (o.grid.data_parallel_size == 0 && device > 0 && gbs > 0 && gbs % device == 0) {
    p.world_size = gbs / device;
  }
  p.micro_batch_size = o.batch.micro_batch_size;
  p.global_batch_size =
      o.batch.global_batch_size ? o.batch.global_batch_size : p.micro_batch_size * p.world_size;
  p.num_workers = d.olmo_num_workers;
  p.drop_last = d.olmo_drop_last;
  p.first_epoch = d.olmo_epoch;
  return p;
}

SeedWords EpochSeed(const OlmoPlan& p, int64_t e) {
  return AddToSeed(p.seed, static_cast<uint64_t>(p.first_epoch + e));
}

}  // namespace olmo_plan

int OlmoTokenSize(const config::DataOptions& d) { return d.olmo_memmap_dtype == "uint32" ? 4 : 2; }

OlmoItemOptions OlmoItemOptionsOf(const config::DataOptions& d) {
  OlmoItemOptions o;
  if (d.pad_id >= 0) o.pad_token_id = d.pad_id;
  o.eos_token_id = d.eod_id;
  o.generate_attention_mask = d.olmo_generate_attention_mask;
  o.generate_doc_lengths = d.olmo_generate_doc_lengths;
  if (d.olmo_instance_filter) {
    InstanceFilter f;
    f.repetition_max_period = d.olmo_repetition_max_period;
    f.repetition_min_period = d.olmo_repetition_min_period;
    f.repetition_max_count = d.olmo_repetition_max_count;
    o.instance_filter = f;
  }
  return o;
}

Result<OlmoPlan> PlanOlmoOrder(const config::JobOptions& o) {
  const auto& d = o.data;
  OlmoPlan p = olmo_plan::GeometryOf(o);
  GRIDFEED_ASSIGN_OR_RETURN(p.files, io::OlmoTokenFiles::Stat(d.olmo_paths, d.olmo_label_mask_paths,
                                                              OlmoTokenSize(d), d.seq_length));
  for (const auto& f : p.files) p.instances += f.instances;
  olmo_plan::AssignSources(d, &p);
  GRIDFEED_RETURN_IF_ERROR(olmo_plan::FinishPlan(o, &p));
  return p;
}

OlmoPositions::OlmoPositions(const OlmoPlan& plan)
    : world_size_(plan.world_size),
      micro_batch_size_(plan.micro_batch_size),
      epoch_stream_(plan.epoch_stream),
      device_batch_(plan.sizes.device_batch_size),
      full_rows_(plan.sizes.device_batch_size > 0
                     ? plan.sizes.num_samples / plan.sizes.device_batch_size *
                           plan.sizes.device_batch_size
                     : 0),
      tail_(OlmoLoaderTail(plan.sizes.num_samples, plan.sizes.device_batch_size, plan.num_workers,
                           plan.drop_last)),
      restart_(plan.restart),
      restart_epoch_(plan.restart_epoch),
      start_index_(plan.start_index),
      total_size_(plan.sizes.total_size),
      drop_last_(plan.drop_last) {
  // The restarted epoch's rank streams have one of two lengths (rank 0's and rank W-1's).
  for (int64_t rank : {int64_t{0}, world_size_ - 1}) {
    const int64_t len = RestartLength(total_size_, start_index_, rank, world_size_);
    restart_tails_.emplace_back(
        len, OlmoLoaderTail(len, device_batch_, plan.num_workers, plan.drop_last));
  }
}

OlmoSlot OlmoPositions::Locate(int64_t position) const {
  const int64_t per_step = micro_batch_size_ * world_size_;
  // Before the start: the order without a restart (no run of this plan reads there).
  const bool before = position < restart_;
  const int64_t q = before ? position : position - restart_;
  const int64_t k = q / per_step, rem = q % per_step;
  const int64_t rank = rem / micro_batch_size_, j = rem % micro_batch_size_;
  int64_t i = k * micro_batch_size_ + j;  // index in the rank's stream from the start
  if (before) {
    const int64_t t = i % epoch_stream_;
    const int64_t s = t < full_rows_ ? t : tail_[static_cast<size_t>(t - full_rows_)];
    return {i / epoch_stream_, rank + s * world_size_};
  }
  // The start's epoch: OLMo's DataLoader over g[start_index:][rank::W].
  const int64_t len = RestartLength(total_size_, start_index_, rank, world_size_);
  const int64_t emitted = Emitted(len, device_batch_, drop_last_);
  if (i < emitted) {
    const int64_t full = len / device_batch_ * device_batch_;
    const auto& tail =
        restart_tails_[0].first == len ? restart_tails_[0].second : restart_tails_[1].second;
    const int64_t s = i < full ? i : tail[static_cast<size_t>(i - full)];
    return {restart_epoch_, start_index_ + rank + s * world_size_};
  }
  i -= emitted;  // later epochs from their start
  const int64_t t = i % epoch_stream_;
  const int64_t s = t < full_rows_ ? t : tail_[static_cast<size_t>(t - full_rows_)];
  return {restart_epoch_ + 1 + i / epoch_stream_, rank + s * world_size_};
}

}  // namespace gridfeed::order
