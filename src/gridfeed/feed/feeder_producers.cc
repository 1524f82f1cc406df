// Many producers (--table-producers): the node leaders build the node images together. Each
// builds the blend and its share of the stores' tables, cuts every node's sections from them,
// and assembles its own node's image from every producer's sections (order/node_image.h).
// Every exchange among the leaders is preceded by an agreement on every leader's status, so a
// producer's failure ends the start-up on every rank with its message instead of a wait.
#include <csignal>
#include <exception>
#include <new>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "gridfeed/config/canonical.h"
#include "gridfeed/core/log.h"
#include "gridfeed/core/memory_usage.h"
#include "gridfeed/feed/feeder_impl.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/order/node_image.h"
#include "gridfeed/parallel/agree.h"

namespace gridfeed::feed {

namespace {

// Collective on `comm`: every rank's `mine`, concatenated in rank order, on every rank. The
// room for them is agreed before the bytes move (a rank that cannot take them tells the others).
template <typename T>
Status AllGatherVector(MPI_Comm comm, int rank_name, MPI_Datatype type, const std::vector<T>& mine,
                       std::vector<T>* all) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  const int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(size)), displs;
  GRIDFEED_RETURN_IF_ERROR(parallel::MpiStatus(
      MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm), "MPI_Allgather"));
  const Status room = Guarded([&] {
    int64_t total = 0;
    for (int c : counts) displs.push_back(static_cast<int>(total)), total += c;
    if (total > std::numeric_limits<int>::max()) return Internal("too many facts to gather");
    all->resize(static_cast<size_t>(total));
    return Status::Ok();
  });
  GRIDFEED_RETURN_IF_ERROR(parallel::AgreeOnStatus(comm, room, rank_name));
  return parallel::MpiStatus(MPI_Allgatherv(mine.data(), count, type, all->data(), counts.data(),
                                            displs.data(), type, comm),
                             "MPI_Allgatherv");
}

}  // namespace

void LogProducerMemory(int node, const char* phase) {
  if (!log::Enabled(log::Level::kDebug)) return;
  log::Debug("table producer " + std::to_string(node) + " after " + phase + ": resident " +
             std::to_string(ResidentBytes() / 1000000) + " MB, peak " +
             std::to_string(PeakResidentBytes() / 1000000) + " MB");
}

// Node images where the nodes hold what their readers read and the order's stores are divided;
// else the whole image where the order divides it (every node holds the whole image: the world
// rank 0 of an amendable order still sees it, as its SamePast needs). --node-window reads of an
// order without node images is left to world rank 0's error.
Feeder::Impl::LeaderImages Feeder::Impl::LeadersMake(int num_nodes) const {
  const auto producers = config::TableProducers(options.feed, num_nodes);
  if (!producers.ok() || *producers < 2) return LeaderImages::kNone;
  const std::string& mode = options.feed.node_window;
  const bool node_images = (mode == "reads" || (mode == "auto" && num_nodes > 1)) &&
                           options.data.dataloader_type == "single" && !pipeline->amendable();
  if (node_images) {
    const auto stores = pipeline->DividedStores();
    if (stores.ok() && !stores->empty()) return LeaderImages::kNodeImages;
  }
  if (mode == "reads") return LeaderImages::kNone;
  const auto units = pipeline->WholeShareUnits();
  return units.ok() && !units->empty() ? LeaderImages::kWholeImage : LeaderImages::kNone;
}

Status Feeder::Impl::AdoptProducersFacts(MPI_Comm leaders, order::BuiltOrder& share,
                                         int64_t* length) {
  const int world_rank = grid->world_rank();
  auto agree = [&](const Status& st) { return parallel::AgreeOnStatus(leaders, st, world_rank); };
  std::vector<int64_t> mine_facts, all_facts;
  GRIDFEED_RETURN_IF_ERROR(agree(Guarded([&] {
    mine_facts = share.ShareFacts();
    return Status::Ok();
  })));
  GRIDFEED_RETURN_IF_ERROR(
      AllGatherVector(leaders, world_rank, MPI_INT64_T, mine_facts, &all_facts));
  const Status st = Guarded([&]() -> Status {
    GRIDFEED_RETURN_IF_ERROR(share.AdoptShareFacts(all_facts));
    *length = share.view().length(split);
    if (*length == 0) {
      return FailedPrecondition("the " + options.feed.split_name +
                                " split is empty with this --split");
    }
    return Status::Ok();
  });
  return agree(st);
}

Status Feeder::Impl::MergeProducersDataFacts(MPI_Comm leaders, int node, order::BuiltOrder& share,
                                             int64_t length, int64_t start, int64_t* facts) {
  const int world_rank = grid->world_rank();
  auto agree = [&](const Status& st) { return parallel::AgreeOnStatus(leaders, st, world_rank); };
  std::vector<char> mine_text;
  Status st = Guarded([&] {
    const std::string text = share.DataFacts();
    mine_text.assign(text.begin(), text.end());
    mine_text.push_back('\0');
    return Status::Ok();
  });
  GRIDFEED_RETURN_IF_ERROR(agree(st));
  std::vector<char> texts;
  GRIDFEED_RETURN_IF_ERROR(AllGatherVector(leaders, world_rank, MPI_CHAR, mine_text, &texts));
  if (node == 0) {
    st = Guarded([&] {
      nlohmann::json data = nlohmann::json::object();
      for (size_t at = 0; at < texts.size();) {
        const std::string text(texts.data() + at);
        data.update(nlohmann::json::parse(text));
        at += text.size() + 1;
      }
      canonical = config::CanonicalText(options.data, data.dump());
      built_stores = share.OpenedStores();
      facts[0] = length;
      facts[1] = start;
      return Status::Ok();
    });
  }
  return agree(st);
}

Result<parallel::ImageProducer> Feeder::Impl::ProduceNodeImage(
    MPI_Comm leaders, int node, const std::vector<std::vector<int>>& keys, int64_t* facts) {
  const int world_rank = grid->world_rank();
  LogProducerMemory(node, "start-up");
  int num_leaders = 0;
  MPI_Comm_size(leaders, &num_leaders);
  auto agree = [&](const Status& st) { return parallel::AgreeOnStatus(leaders, st, world_rank); };
  const std::string who = "table producer " + std::to_string(node);

  // 1. World rank 0 divides the stores by their index bytes and tells the others, with the
  //    cursor the schedule starts from.
  std::vector<std::string> stores;
  int producers = 1;
  Status st = Guarded([&]() -> Status {
    GRIDFEED_ASSIGN_OR_RETURN(stores, pipeline->DividedStores());
    GRIDFEED_ASSIGN_OR_RETURN(producers, config::TableProducers(options.feed, num_leaders));
    return Status::Ok();
  });
  std::vector<int> owner(stores.size(), 0);
  int64_t start = 0;
  if (node == 0 && st.ok()) {
    st = Guarded([&] {
      std::vector<uint64_t> costs;
      for (const auto& s : stores) {
        const auto bytes = io::FileSize(s + ".idx");  // a missing one fails its producer's open
        costs.push_back(bytes.ok() ? static_cast<uint64_t>(*bytes) : 0);
      }
      owner = order::PlanProducers(costs, producers);
      start = ExpectedStart();
      return Status::Ok();
    });
  }
  GRIDFEED_RETURN_IF_ERROR(agree(st));
  GRIDFEED_RETURN_IF_ERROR(parallel::MpiStatus(
      MPI_Bcast(owner.data(), static_cast<int>(owner.size()), MPI_INT, 0, leaders),
      "MPI_Bcast(table producers' stores)"));
  GRIDFEED_RETURN_IF_ERROR(parallel::MpiStatus(MPI_Bcast(&start, 1, MPI_INT64_T, 0, leaders),
                                               "MPI_Bcast(schedule start)"));

  // 2. This producer's share: the blend and its own stores' tables.
  std::unordered_map<std::string, int> owner_of;
  for (size_t s = 0; s < stores.size(); ++s) owner_of[stores[s]] = owner[s];
  std::unique_ptr<order::BuiltOrder> share;
  GRIDFEED_RETURN_IF_ERROR(BuildProducerShare(
      leaders, node,
      [&] {
        return pipeline->BuildShare([&](const std::string& prefix) {
          const auto it = owner_of.find(prefix);
          return it != owner_of.end() && it->second == node;
        });
      },
      &share));
  // 3. Every producer learns the other producers' mids (ranges, samples per epoch).
  int64_t length = 0;
  GRIDFEED_RETURN_IF_ERROR(AdoptProducersFacts(leaders, *share, &length));

  // 4. World rank 0 names the data by every producer's facts of its stores (the canonical text
  //    one producer's build gives).
  GRIDFEED_RETURN_IF_ERROR(MergeProducersDataFacts(leaders, node, *share, length, start, facts));

  // 5. Every node's sections of this producer's sources, then the exchange.
  order::ScheduleOptions s;
  s.total_samples = length;
  s.micro_batch_size = options.batch.micro_batch_size;
  s.dp_size = grid->dp_size();
  s.global_batch_size = options.batch.global_batch_size;
  s.start_consumed = start;
  std::vector<std::vector<std::byte>> sections;
  std::vector<std::span<const std::byte>> out;
  std::optional<order::ReadSchedule> from;
  st = Guarded([&]() -> Status {
    sections.resize(static_cast<size_t>(num_leaders));
    GRIDFEED_ASSIGN_OR_RETURN(from, order::ReadSchedule::Create(s));
    for (int n = 0; n < num_leaders; ++n) {
      GRIDFEED_ASSIGN_OR_RETURN(sections[n],
                                share->NodeSections(split, from->PositionsOf(keys[n]), node));
      if (node == options.feed.testing_corrupt_sections_producer && !sections[n].empty()) {
        sections[n].back() ^= std::byte{0x01};  // injected by a test, after the digest
      }
    }
    out.assign(sections.begin(), sections.end());
    return Status::Ok();
  });
  if (!st.ok()) st = st.WithContext(who);
  GRIDFEED_RETURN_IF_ERROR(agree(st));
  share->ReleaseShareTables();
  LogProducerMemory(node, "the sections");
  std::vector<std::vector<std::byte>> received;
  GRIDFEED_RETURN_IF_ERROR(parallel::ExchangeBytes(leaders, world_rank, out, &received));
  out.clear();
  sections.clear();
  LogProducerMemory(node, "the exchange");

  // 6. This node's image from every producer's sections (Distribute agrees on the outcome).
  return AssembledImage(node, order::Builders(owner), [&] {
    return share->AssembleNodeImage(split, from->PositionsOf(keys[node]), node == 0,
                                    std::move(received));
  });
}

Status Feeder::Impl::BuildProducerShare(
    MPI_Comm leaders, int node,
    const std::function<Result<std::unique_ptr<order::BuiltOrder>>()>& build,
    std::unique_ptr<order::BuiltOrder>* share) {
  Status st = Guarded([&]() -> Status {
    if (node == options.feed.testing_kill_producer) std::raise(SIGKILL);  // a test's crash
    if (node == options.feed.testing_fail_producer) {
      return Internal("cannot build its share (injected by test)");
    }
    GRIDFEED_ASSIGN_OR_RETURN(*share, build());
    return Status::Ok();
  });
  if (!st.ok()) st = st.WithContext("table producer " + std::to_string(node));
  GRIDFEED_RETURN_IF_ERROR(parallel::SleepyBarrier(leaders));  // the quick ones sleep
  GRIDFEED_RETURN_IF_ERROR(parallel::AgreeOnStatus(leaders, st, grid->world_rank()));
  LogProducerMemory(node, "its share");
  return Status::Ok();
}

Result<parallel::ImageProducer> Feeder::Impl::AssembledImage(
    int node, int producers,
    const std::function<Result<std::unique_ptr<order::ImageWriter>>()>& assemble) {
  std::shared_ptr<order::ImageWriter> writer;
  const Status st = Guarded([&]() -> Status {
    GRIDFEED_ASSIGN_OR_RETURN(writer, assemble());
    return Status::Ok();
  });
  if (!st.ok()) return st.WithContext("node " + std::to_string(node) + "'s table image");
  LogProducerMemory(node, "the assembly");
  produced_by = producers;
  return parallel::ImageProducer{writer->size(),
                                 [writer](std::byte* dst) { writer->WriteTo(dst); },
                                 writer->leaves_dst_untouched(),
                                 {}};
}

}  // namespace gridfeed::feed
