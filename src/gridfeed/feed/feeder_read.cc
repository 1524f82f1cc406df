// The Feeder's reading: the prefetch thread assembling payloads along the read schedule, the
// hand-over and TP broadcast of each micro-batch (Next) and the device payload's copy back.
#include <cstring>
#include <exception>
#include <new>

#include "gridfeed/feed/feeder_impl.h"
#include "gridfeed/parallel/agree.h"

namespace gridfeed::feed {

void Feeder::Impl::StartPrefetch() {
  const parallel::Grid& g = *grid;
  keeps_records = g.is_reader() && g.first_stage() && g.cp_rank() == 0;
  if (g.is_reader()) worker = std::thread([this] { Prefetch(); });
}

Status Feeder::Impl::Assemble(const order::StepBatch& batch, std::vector<std::byte>* out,
                              std::vector<order::SampleRecord>* records,
                              order::AssemblyScratch* scratch) const {
  const parallel::Grid& g = *grid;
  records->clear();
  const PayloadLayout at =
      layout.At(batch.positions.empty() ? layout.seq_length : seq_lengths.At(batch.positions[0]));
  out->assign(at.total_bytes, std::byte{0});
  if (at.packed) return AssemblePacked(batch, at, out, records);
  for (size_t k = 0; k < batch.positions.size(); ++k) {
    const int64_t position = batch.positions[k];
    const auto i = static_cast<int64_t>(k);
    // Only this stage's fields, only this CP rank's slice, straight into the payload.
    order::FieldTargets targets = at.Targets(out, i);
    targets.cp_size = g.cp_size();
    targets.cp_rank = g.cp_rank();
    if (position == options.feed.testing_fail_read_position) {
      return IoError("cannot read sample " + std::to_string(position) + " of the " +
                     options.feed.split_name + " split (injected by test)");
    }
    order::SampleRecord r = view->ReadFields(split, position, targets,
                                             /*hash_tokens=*/keeps_records, scratch);
    if (keeps_records) {
      r.iteration = batch.iteration;
      r.micro_batch = batch.micro_batch;
      r.dp_rank = g.dp_rank();
      records->push_back(r);
    }
    const int64_t sample_index = view->SampleIndex(split, position);
    at.PutHeader(out, PayloadLayout::kSampleIndices, i, sample_index);
    at.PutHeader(out, PayloadLayout::kSourceIds, i, r.dataset);
    at.PutHeader(out, PayloadLayout::kSamplePositions, i, position);
  }
  return Status::Ok();
}

// A packed order assembles the whole micro-batch at once (its CP slices span samples).
Status Feeder::Impl::AssemblePacked(const order::StepBatch& batch, const PayloadLayout& at,
                                    std::vector<std::byte>* out,
                                    std::vector<order::SampleRecord>* records) const {
  const parallel::Grid& g = *grid;
  for (int64_t position : batch.positions) {
    if (position == options.feed.testing_fail_read_position) {
      return IoError("cannot read sample " + std::to_string(position) + " of the " +
                     options.feed.split_name + " split (injected by test)");
    }
  }
  order::PackedTargets targets = at.Packed(out);
  targets.cp_size = g.cp_size();
  targets.cp_rank = g.cp_rank();
  GRIDFEED_RETURN_IF_ERROR(
      view->ReadPacked(split, batch.positions, targets, /*hash_tokens=*/keeps_records, records));
  // The receivers bound a count by its room; here a count beyond it is the writer's bug.
  for (const PayloadLayout::Slot& s : at.slots) {
    if (s.spec->shape != order::FieldShape::kVariable) continue;
    int64_t count = 0;
    std::memcpy(&count, out->data() + s.count_offset, 8);
    if (count < 0 || count > s.capacity) {
      return Internal(std::string("the order wrote ") + std::to_string(count) + " entries of " +
                      s.spec->name + ", room for " + std::to_string(s.capacity));
    }
  }
  for (size_t k = 0; k < batch.positions.size(); ++k) {
    const auto i = static_cast<int64_t>(k);
    const int64_t position = batch.positions[k];
    order::SampleRecord& r = (*records)[k];
    r.iteration = batch.iteration;
    r.micro_batch = batch.micro_batch;
    r.dp_rank = g.dp_rank();
    const int64_t sample_index = view->SampleIndex(split, position);
    at.PutHeader(out, PayloadLayout::kSampleIndices, i, sample_index);
    at.PutHeader(out, PayloadLayout::kSourceIds, i, r.dataset);
    at.PutHeader(out, PayloadLayout::kSamplePositions, i, position);
  }
  if (!keeps_records) records->clear();
  return Status::Ok();
}

// A read error (or an exception: allocation, a library's) ends the walk with an error item, so
// Next() returns it instead of waiting for a step that never comes, and never std::terminate.
void Feeder::Impl::Prefetch() {
  auto walker = schedule->Walk(grid->dp_rank());
  order::StepBatch batch;
  order::AssemblyScratch scratch;
  const bool fetch_ordered = view->fetch_ordered();
  for (int64_t k = 0;; ++k) {
    Prefetched item;
    try {
      if (!walker.Next(&batch)) return;
      if (fetch_ordered) view->BeginMicroBatch(k);
      item.status = Assemble(batch, &item.payload, &item.records, &scratch);
    } catch (const std::bad_alloc&) {
      item.status = Internal("out of memory while assembling a micro-batch");
    } catch (const std::exception& e) {
      item.status = Internal(std::string("while assembling a micro-batch: ") + e.what());
    } catch (...) {
      item.status = Internal("an unknown exception while assembling a micro-batch");
    }
    const bool failed = !item.status.ok();
    if (failed) {
      item.status =
          item.status.WithContext("reader world rank " + std::to_string(grid->world_rank()) + " (" +
                                  grid->Describe() + ")");
    }
    std::unique_lock lock(mu);
    cv.wait(lock, [&] {
      return stop || static_cast<int64_t>(ready.size()) < options.feed.prefetch_depth;
    });
    if (stop) return;
    ready.push_back(std::move(item));
    cv.notify_all();
    if (failed) return;
  }
}

Feeder::Impl::Prefetched Feeder::Impl::Take() {
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return !ready.empty(); });
  auto payload = std::move(ready.front());
  ready.pop_front();
  cv.notify_all();
  return payload;
}

Status Feeder::Impl::ShareReadStatus(Status* read) {
  if (grid->tp_size() > 1) {
    Status shared = parallel::BroadcastStatus(grid->tp_comm(), 0, *read);
    *read = shared;
  }
  if (!read->ok()) failed = *read;
  return *read;
}

Result<MicroBatch> Feeder::Next() {
  Impl& im = *impl_;
  const parallel::Grid& g = *im.grid;
  if (!im.failed.ok()) return im.failed;
  if (im.next_step >= im.schedule->num_steps()) {
    return OutOfRange("the " + im.options.feed.split_name + " split is exhausted after " +
                      std::to_string(im.consumed) + " consumed samples (" +
                      std::to_string(im.split_length) + " in the split)");
  }
  ++im.next_step;
  // Every position of this step lies in the global batch that holds `consumed` (PlanSchedule).
  const PayloadLayout layout = im.layout.At(im.seq_lengths.At(im.consumed));
  im.consumed += im.schedule->samples_per_step();
  MicroBatch mb;
  mb.micro_batch_size = im.options.batch.micro_batch_size;
  mb.seq_length = layout.seq_length;
  mb.local_seq_length = mb.seq_length / g.cp_size();
  if (!layout.receives) return mb;  // a middle stage of an order that gives it nothing
  if (im.device_bcast) {
    // Device path: TP rank 0 stages the payload in the pinned buffer, every TP rank ends with
    // it in device memory; the host fields stay empty.
    Status read;
    if (g.tp_rank() == 0) {
      auto item = im.Take();
      read = item.status;
      if (read.ok()) {
        std::memcpy(im.device_bcast->host_buffer(), item.payload.data(), layout.total_bytes);
      }
      mb.records = std::move(item.records);
    }
    GRIDFEED_RETURN_IF_ERROR(im.ShareReadStatus(&read));
    Status sent = im.device_bcast->Broadcast(layout.total_bytes).WithContext("device broadcast");
    if (!sent.ok()) return im.failed = sent;
    mb.has_inputs = layout.has_inputs;
    mb.has_targets = layout.has_targets;
    mb.device_payload = im.device_bcast->device_buffer();
    mb.device_payload_bytes = layout.total_bytes;
    return mb;
  }
  std::vector<std::byte> payload;
  Status read;
  if (g.tp_rank() == 0) {
    auto item = im.Take();
    read = item.status;
    payload = std::move(item.payload);
    mb.records = std::move(item.records);
  }
  GRIDFEED_RETURN_IF_ERROR(im.ShareReadStatus(&read));
  if (g.tp_rank() != 0) payload.assign(layout.total_bytes, std::byte{0});
  if (g.tp_size() > 1) {
    Status sent = BroadcastPayload(g.tp_comm(), layout, &payload);
    if (!sent.ok()) return im.failed = sent.WithContext("TP broadcast");
  }
  layout.Unpack(std::move(payload), &mb);
  return mb;
}

// The fixed part (header, fixed fields, the variable fields' counts) first, then each
// variable field's used values: the receivers size the second message from the first.
Status BroadcastPayload(MPI_Comm comm, const PayloadLayout& layout,
                        std::vector<std::byte>* payload) {
  std::span<std::byte> bytes(*payload);
  GRIDFEED_RETURN_IF_ERROR(parallel::BroadcastBytes(comm, 0, bytes.first(layout.fixed_bytes)));
  for (const PayloadLayout::Slot& s : layout.slots) {
    if (s.spec->shape != order::FieldShape::kVariable) continue;
    const size_t used =
        static_cast<size_t>(layout.CountOf(*payload, s)) * order::DTypeSize(s.spec->dtype);
    GRIDFEED_RETURN_IF_ERROR(parallel::BroadcastBytes(comm, 0, bytes.subspan(s.offset, used)));
  }
  return Status::Ok();
}

Result<std::vector<std::byte>> Feeder::DevicePayloadToHost(const MicroBatch& mb) const {
  const Impl& im = *impl_;
  if (!im.device_bcast || mb.device_payload == nullptr) {
    return FailedPrecondition("the micro-batch has no device payload");
  }
  if (mb.device_payload != im.device_bcast->device_buffer() ||
      mb.device_payload_bytes > im.layout.total_bytes) {
    return InvalidArgument("the micro-batch's device payload is not this feeder's");
  }
  std::vector<std::byte> out(mb.device_payload_bytes);
  GRIDFEED_RETURN_IF_ERROR(im.device_bcast->CopyToHost(out.size(), out.data()));
  return out;
}

}  // namespace gridfeed::feed
