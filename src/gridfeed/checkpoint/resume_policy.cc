#include "gridfeed/checkpoint/resume_policy.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "gridfeed/config/canonical.h"
#include "gridfeed/config/mixture_schedule.h"

namespace gridfeed::checkpoint {

namespace {

std::string ScheduleOf(const std::string& canonical) {
  return config::MixtureScheduleOf(canonical);
}

// Both orders are mixtures and only their schedules (or what follows from them) differ.
bool OnlyScheduleChanged(const std::string& before, const std::string& after) {
  if (ScheduleOf(before).empty() || ScheduleOf(after).empty()) return false;
  const std::string a = config::WithoutMixtureSchedule(before);
  return a != "null" && a == config::WithoutMixtureSchedule(after);
}

}  // namespace

std::string WithoutScheduleText(const std::string& canonical) {
  return config::WithoutMixtureSchedule(canonical);
}

std::string FirstChangedStage(const std::string& before_schedule,
                              const std::string& after_schedule) {
  const auto a = nlohmann::json::parse(before_schedule, nullptr, false);
  const auto b = nlohmann::json::parse(after_schedule, nullptr, false);
  if (!a.is_object() || !b.is_object()) return "the schedule";
  if (a.value("sources", nlohmann::json()) != b.value("sources", nlohmann::json())) {
    return "sources";
  }
  const auto sa = a.value("schedule", nlohmann::json::array());
  const auto sb = b.value("schedule", nlohmann::json::array());
  for (size_t i = 0; i < std::max(sa.size(), sb.size()); ++i) {
    if (i >= sa.size() || i >= sb.size() || sa[i] != sb[i]) {
      const auto& st = i < sa.size() ? sa[i] : sb[i];
      return "stage '" + st.value("name", std::string("?")) + "' (schedule[" + std::to_string(i) +
             "])";
    }
  }
  if (a.value("max_epochs", nlohmann::json()) != b.value("max_epochs", nlohmann::json())) {
    return "max_epochs";
  }
  return "the resolved schedule (budgets in iterations follow the global batch size)";
}

Result<ResumePoint> CheckResume(const Cursor& saved, const ResumeRequest& now) {
  const std::string where = "checkpoint '" + now.path + "'";
  if (now.max_consumed >= 0 && saved.consumed_train_samples > now.max_consumed) {
    return DataLoss(where + " holds " + std::to_string(saved.consumed_train_samples) +
                    " consumed samples, more than the " + std::to_string(now.max_consumed) +
                    " of the split this run reads: no run of this order can have written it "
                    "(forged or corrupt), unless the split was made shorter since (a smaller "
                    "--train-samples or a shortened mixture schedule); refusing to resume");
  }
  if (config::FingerprintOf(saved.canonical_config) != saved.fingerprint) {
    return DataLoss(where + ": its configuration text does not match its fingerprint (corrupt)");
  }
  bool amended = false;
  if (saved.fingerprint != now.fingerprint &&
      OnlyScheduleChanged(saved.canonical_config, now.canonical_config)) {
    const std::string stage =
        FirstChangedStage(ScheduleOf(saved.canonical_config), ScheduleOf(now.canonical_config));
    // Only the sources' order changed: say so (not "the token files changed" further down).
    const std::string reorder = config::DescribeSourceReorder(ScheduleOf(saved.canonical_config),
                                                              ScheduleOf(now.canonical_config));
    if (!reorder.empty()) {
      return FailedPrecondition(where + ": " + reorder + "; refusing to resume");
    }
    if (!now.allow_schedule_change || !now.check_same_past) {
      return FailedPrecondition(where +
                                " was written with another mixture schedule (first "
                                "difference: " +
                                stage +
                                "); pass --allow-schedule-change to "
                                "continue if the order up to its cursor is unchanged");
    }
    const Status same = now.check_same_past(saved);
    if (!same.ok()) {
      return FailedPrecondition(
          where + ": the amended mixture schedule (first difference: " + stage +
          ") changes the order before the cursor (" + std::to_string(saved.consumed_train_samples) +
          " samples): " + same.message() + "; refusing to resume");
    }
    amended = true;
  } else if (saved.fingerprint != now.fingerprint) {
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
  return ResumePoint{saved.consumed_train_samples, saved.iteration, amended};
}

}  // namespace gridfeed::checkpoint
