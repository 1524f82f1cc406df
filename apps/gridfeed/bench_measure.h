// The single-process measurements of `gridfeed bench`, on world rank 0 alone (no MPI calls):
// build the order's tables through its pipeline (order/pipeline.h) and write their image into
// fresh memory, as the feeder does into its shared window; then view the image as a reader
// does and time Read() over consecutive positions of the split next to the memcpy floor of
// the same samples (the pipeline's floor, order/assembly_floor.h), both on data in memory
// (each block of samples is read once untimed first). Library exceptions become Status.
#pragma once

#include <cstdint>

#include "bench_report.h"
#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"

namespace gridfeed::app {

// `options` resolved as the feeder resolves them (DP size set). `samples`: positions to read
// (wrapping around the split); 0 = as many as fit in about two seconds. Fills
// report->build and report->assembly. FailedPrecondition for an empty split.
Status MeasureBuildAndAssembly(const config::JobOptions& options, int64_t samples,
                               BenchReport* report);

}  // namespace gridfeed::app
