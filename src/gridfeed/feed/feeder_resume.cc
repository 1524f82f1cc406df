// The Feeder and its checkpoint cursor: the resume phase of Open (checkpoint's resume policy,
// the pipeline's amendment policy) and SaveCheckpoint.
#include <exception>
#include <new>

#include "gridfeed/checkpoint/resume_policy.h"
#include "gridfeed/config/canonical.h"
#include "gridfeed/feed/feeder_impl.h"
#include "gridfeed/parallel/agree.h"

namespace gridfeed::feed {

// World rank 0 reads and checks the cursor (checkpoint's resume policy); everyone learns the
// outcome.
Status Feeder::Impl::Resume() {
  const parallel::Grid& g = *grid;
  consumed = options.resume.consumed_samples;
  schedule_history = pipeline->StartHistory(consumed);
  if (options.resume.resume_from.empty()) return Status::Ok();
  int64_t point[2] = {0, 0};  // consumed, iteration
  // Rank 0 reads and checks the cursor; an amended schedule rebuilds the saved order (SamePast).
  auto check = [&]() -> Status {
    checkpoint::ResumeRequest now;
    now.path = options.resume.resume_from;
    now.fingerprint = fingerprint;
    now.canonical_config = canonical;
    now.micro_batch_size = options.batch.micro_batch_size;
    now.dp = options.grid.data_parallel_size;
    now.global_batch_size = options.batch.global_batch_size;
    now.allow_batch_size_change = options.resume.allow_batch_size_change;
    now.order_depends_on_geometry = options.data.dataloader_type == "cyclic";
    now.token_store_facts = store_facts;
    now.allow_schedule_change = options.resume.allow_schedule_change;
    // The single sampler stops at the split's end: a cursor past it is no run's (unless the
    // order is sized otherwise: Pipeline::cursor_bounded_by_split).
    if (options.data.dataloader_type != "cyclic" && pipeline->cursor_bounded_by_split()) {
      now.max_consumed = split_length;
    }
    now.check_same_past = [this](const checkpoint::Cursor& saved) { return SamePast(saved); };
    auto cursor = checkpoint::ReadCursor(options.resume.resume_from);
    auto resumed = cursor.ok() ? checkpoint::CheckResume(*cursor, now)
                               : Result<checkpoint::ResumePoint>(cursor.status());
    if (resumed.ok()) {
      point[0] = resumed->consumed_samples;
      point[1] = resumed->iteration;
      if (pipeline->amendable()) {
        schedule_history =
            pipeline->ResumedHistory(cursor->schedule_history, cursor->canonical_config, point[0],
                                     resumed->schedule_amended);
      }
    } else {
      return resumed.status();
    }
    return Status::Ok();
  };
  Status checked;
  if (g.world_rank() == 0) {
    // Rank 0's failures, allocation and JSON included, must reach the broadcast below: the
    // other ranks are waiting in it (as in BuildAndShareTables).
    try {
      checked = check();
    } catch (const std::bad_alloc&) {
      checked = Internal("out of memory while checking the checkpoint '" +
                         options.resume.resume_from + "' (rebuilding its order)");
    } catch (const std::exception& e) {
      checked = Internal("while checking the checkpoint '" + options.resume.resume_from +
                         "': " + e.what());
    }
  }
  GRIDFEED_RETURN_IF_ERROR(parallel::BroadcastStatus(g.world(), 0, checked.WithContext("rank 0")));
  GRIDFEED_RETURN_IF_ERROR(
      parallel::MpiStatus(MPI_Bcast(point, 2, MPI_INT64_T, 0, g.world()), "MPI_Bcast(cursor)"));
  // The options are the same on every rank (agreed fingerprint), so all or none broadcast.
  if (pipeline->amendable()) {
    GRIDFEED_RETURN_IF_ERROR(parallel::BroadcastString(g.world(), 0, &schedule_history));
  }
  consumed = point[0];
  resumed_iteration = point[1];
  return Status::Ok();
}

Status Feeder::Impl::SamePast(const checkpoint::Cursor& saved) const {
  GRIDFEED_ASSIGN_OR_RETURN(config::DataOptions before,
                            config::FromCanonical(saved.canonical_config));
  config::JobOptions old = options;
  old.data = before;
  old.batch.global_batch_size = saved.global_batch_size;  // budgets in iterations
  if (!image) return Internal("rank 0 holds no table image");
  return pipeline->SamePast(old, image->bytes(), saved.consumed_train_samples);
}

Status Feeder::SaveCheckpoint(const std::string& path, int64_t iteration) const {
  const Impl& im = *impl_;
  const parallel::Grid& g = *im.grid;
  // The cursor counts a micro-batch as soon as Next() starts it: after a read error (sticky,
  // known to the failing reader's TP group) a checkpoint would skip a micro-batch nobody got.
  // Every rank refuses the save when any has failed.
  GRIDFEED_RETURN_IF_ERROR(
      parallel::AgreeOnStatus(g.world(), im.failed, g.world_rank())
          .WithContext("no checkpoint after a micro-batch that could not be delivered"));
  Status written;
  if (g.world_rank() == 0) {
    checkpoint::Cursor c;
    c.fingerprint = im.fingerprint;
    c.canonical_config = im.canonical;
    c.iteration = iteration;
    c.consumed_train_samples = im.consumed;
    const auto sources = im.view->Sources(im.split);
    c.source_samples.assign(sources.size(), 0);
    const int64_t upto = std::min(im.consumed, im.split_length);
    if (sources.size() == 1) {
      c.source_samples[0] = upto;
    } else {
      for (int64_t p = 0; p < upto; ++p) ++c.source_samples[im.view->SourceOf(im.split, p)];
    }
    if (im.seq_lengths.uniform()) {
      for (int64_t n : c.source_samples) c.source_tokens.push_back(n * im.seq_lengths.length[0]);
    } else {
      c.source_tokens.assign(sources.size(), 0);
      for (int64_t p = 0; p < upto; ++p) {
        c.source_tokens[static_cast<size_t>(im.view->SourceOf(im.split, p))] +=
            im.seq_lengths.At(p);
      }
    }
    c.dp = g.dp_size(), c.tp = g.tp_size(), c.pp = g.pp_size(), c.cp = g.cp_size();
    c.token_store_facts = im.store_facts;
    c.order_position = im.view->DescribeCursor(im.split, im.consumed);
    c.schedule_history = im.schedule_history;
    c.micro_batch_size = im.options.batch.micro_batch_size;
    c.global_batch_size = im.options.batch.global_batch_size;
    written = checkpoint::WriteCursor(path, c);
  }
  return parallel::BroadcastStatus(g.world(), 0, written.WithContext("rank 0"));
}

}  // namespace gridfeed::feed
