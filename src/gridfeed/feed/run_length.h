// Whether a run of --train-iters iterations can complete with the data its feeder has, checked
// at start-up so that a run that would stop part-way (the split exhausted) is refused before
// any step instead of failing hours in. Not collective: every rank derives the same answer from
// the same read schedule, so every rank refuses together. Thread safe (const reads).
#pragma once

#include <cstdint>

#include "gridfeed/core/status.h"
#include "gridfeed/feed/feeder.h"

namespace gridfeed::feed {

// `train_iters` is the run's last iteration + 1 (--train-iters, counted from 0 like the
// checkpoint's iteration). OK when the iterations left after the feeder's resumed iteration
// fit the positions its schedule has left (always for an endless cyclic schedule);
// FailedPrecondition naming --train-iters, the samples needed and held, and the iteration at
// which the data would run out, otherwise.
Status CheckTrainItersFit(const Feeder& feeder, int64_t train_iters);

}  // namespace gridfeed::feed
