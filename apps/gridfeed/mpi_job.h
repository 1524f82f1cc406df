// How an MPI subcommand (run, bench) starts and ends: MPI_Init_thread, the body, then on an
// agreed error every rank prints it and all exit 1 together; an unexpected exception aborts the
// job from the rank that saw it (it cannot know where its peers wait).
// Collective: every rank calls it with the same `command`.
#pragma once

#include <functional>

#include "gridfeed/core/status.h"

namespace gridfeed::app {

// `command` names the subcommand in messages ("gridfeed run"). Returns the body's OK status
// after MPI_Finalize; on an error it does not return.
Status RunMpiJob(const char* command, const std::function<Status()>& body);

}  // namespace gridfeed::app
