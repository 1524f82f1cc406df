// The data orders gridfeed knows, and how the options choose one. Everything outside order/
// that must treat orders differently asks the registry: the feeder, checkpoints and audits go
// through Pipeline (pipeline.h); the offline tools (`gridfeed tables`, `samples`, `bench`, the
// Python module's tables()/samples()) through a kind's functions, which return named arrays
// (offline_output.h) they write or hand over generically; `gridfeed plan` through its plan.
//
// Adding a pipeline: a folder under order/ with its Pipeline, its offline functions and a
// PipelineKind, one row in registry.cc, and its option rows (config/option_table). The table is
// static and immutable: thread safe.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"
#include "gridfeed/order/assembly_floor.h"
#include "gridfeed/order/offline_output.h"
#include "gridfeed/order/pipeline.h"

namespace gridfeed::order {

struct PipelineKind {
  const char* name;  // "megatron", "olmo", ...: `gridfeed bench`'s report
  // Whether these options select it. The registry asks in its order; the last kind
  // (Megatron's) selects whatever no other does.
  bool (*selects)(const config::DataOptions& data);
  // The pipeline for validated options (see Pipeline::For); InvalidArgument for a combination
  // the pipeline cannot feed yet.
  Result<std::unique_ptr<Pipeline>> (*make)(const config::JobOptions& options);
  // Tokens per sample along the split (pipeline.h's SeqLengthsOf). Null: --seq-length
  // throughout.
  Result<SeqLengths> (*seq_lengths)(const config::JobOptions& options, Split split);
  // The order's tables, as `gridfeed tables` writes them. `early` (may be null): where arrays
  // done before the rest may go at once (offline_output.h). Null: `no_tables` says why and
  // what to use instead.
  Result<OfflineOutput> (*tables)(const config::JobOptions& options, ArraySink* early);
  const char* no_tables;
  // Fields of the positions of the split named by options.feed.split_name, in the order given,
  // as `gridfeed samples` writes them. Positions are checked before anything is read.
  Result<OfflineOutput> (*samples)(const config::JobOptions& options,
                                   const PositionRequest& positions);
  // What `gridfeed bench` measures its reads against (assembly_floor.h) and the size of its
  // tables in an image. Null: `no_bench` says why bench cannot measure it.
  MakeFloorFn floor;
  TableBytesFn table_bytes;
  const char* no_bench;
  // `gridfeed plan`: the schedule's arithmetic before training, as text or JSON. Null:
  // `no_plan` says why.
  Result<std::string> (*plan)(const config::JobOptions& options, bool json);
  const char* no_plan;
};

// Every kind, in the order they are asked.
std::span<const PipelineKind* const> PipelineKinds();
// The kind `data` selects (always one).
const PipelineKind& KindOf(const config::DataOptions& data);

}  // namespace gridfeed::order
