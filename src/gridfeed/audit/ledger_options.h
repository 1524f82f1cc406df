// Internal to audit/: the options of a ledger's configurations, shared by replay.cc,
// verify.cc and accounting.cc. Nothing outside audit/ includes it.
#pragma once

#include <cstddef>

#include "gridfeed/audit/ledger.h"
#include "gridfeed/config/options.h"
#include "gridfeed/core/status.h"

namespace gridfeed::audit {

// The options of the ledger's configuration `i` (ledger.schedules; exact inverse of the
// canonical text), with the geometry of the first run that read under it (an order that depends
// on it, OLMo's, or budgets in iterations, were fingerprinted with it) and enough iterations for
// every record.
Result<config::JobOptions> LedgerOptions(const Ledger& ledger, size_t i = 0);

}  // namespace gridfeed::audit
