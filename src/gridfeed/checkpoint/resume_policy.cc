#include "gridfeed/checkpoint/resume_policy.h"

#include <sstream>

#include "gridfeed/config/canonical.h"

namespace gridfeed::checkpoint {

Result<ResumePoint> CheckResume(const Cursor& saved, const ResumeRequest& now) {
  const std::string where = "checkpoint '" + now.path + "'";
  if (config::FingerprintOf(saved.canonical_config) != saved.fingerprint) {
    return DataLoss(where + ": its configuration text does not match its fingerprint (corrupt)");
  }
  if (saved.fingerprint != now.fingerprint) {
    return FailedPrecondition(where + " was written for another data order (" +
                              config::DescribeChange(saved.canonical_config, now.canonical_config) +
                              "); refusing to resume");
  }
  if (!saved.token_store_facts.empty() && saved.token_store_facts != now.token_store_facts) {
    // One line per store: name the first that changed.
    std::istringstream a(saved.token_store_facts), b(now.token_store_facts);
    std::string la, lb;
    while (std::getline(a, la) && std::getline(b, lb) && la == lb) {
    }
    return FailedPrecondition(where + ": the token files changed since it was written (saved '" +
                              la + "', now '" + lb + "'; index digest, data bytes, sampled " +
                              "data digest, store); refusing to resume");
  }
  if (now.order_depends_on_geometry &&
      (saved.micro_batch_size != now.micro_batch_size || saved.dp != now.dp)) {
    return FailedPrecondition(
        where + " was written with micro-batch size " + std::to_string(saved.micro_batch_size) +
        " and DP " + std::to_string(saved.dp) + ", now " + std::to_string(now.micro_batch_size) +
        " and " + std::to_string(now.dp) +
        "; with --dataloader-type cyclic the order depends on both, so they must stay");
  }
  if (saved.global_batch_size != now.global_batch_size && !now.allow_batch_size_change) {
    return FailedPrecondition(where + " used global batch size " +
                              std::to_string(saved.global_batch_size) + ", now " +
                              std::to_string(now.global_batch_size) +
                              "; pass --allow-batch-size-change to continue from the same global "
                              "sample");
  }
  return ResumePoint{saved.consumed_train_samples, saved.iteration};
}

}  // namespace gridfeed::checkpoint
