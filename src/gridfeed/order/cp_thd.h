// Context-parallel slicing of packed (THD) sequences, as Transformer Engine's
// thd_get_partitioned_indices does it: every sequence of the packed row is cut into 2*cp chunks
// and CP rank r keeps chunks r and 2*cp-1-r (cp_zigzag.h is the same cut for one sequence per
// row). The schema's CpSlicing::kThd (field_schema.h) names this rule.
//
// Pure; thread safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gridfeed/core/status.h"

namespace gridfeed::order {

// thd_get_partitioned_indices(cu, total, cp, rank): the total/cp positions of the flattened
// sequence CP rank `rank` keeps. InvalidArgument as TE checks: cu needs >= 2 entries, 0 <= rank
// < cp, total > 0 and total % (2*cp) == 0, every cu entry a multiple of 2*cp.
Result<std::vector<int32_t>> ThdPartitionedIndices(std::span<const int32_t> cu, int64_t total,
                                                   int64_t cp, int64_t rank);

}  // namespace gridfeed::order
