// Many producers of the whole image (--table-producers where every node holds the whole image:
// --node-window full, or orders without node images): the node leaders divide the build's
// units (Pipeline::WholeShareUnits), each builds its share (BuildWholeShare), sends the same
// sections (its units' tables) to every other leader, and assembles the whole image from every
// producer's sections (BuiltOrder::AssembleWholeImage), byte for byte one process's build.
// As for node images (feeder_producers.cc), every exchange is preceded by an agreement on
// every leader's status, so a producer's failure ends the start-up everywhere with its message.
#include <algorithm>

#include "gridfeed/feed/feeder_impl.h"
#include "gridfeed/order/node_image.h"
#include "gridfeed/parallel/agree.h"

namespace gridfeed::feed {

Result<parallel::ImageProducer> Feeder::Impl::ProduceWholeImage(MPI_Comm leaders, int node,
                                                                int64_t* facts) {
  const int world_rank = grid->world_rank();
  LogProducerMemory(node, "start-up");
  int num_leaders = 0;
  MPI_Comm_size(leaders, &num_leaders);
  auto agree = [&](const Status& st) { return parallel::AgreeOnStatus(leaders, st, world_rank); };
  const std::string who = "table producer " + std::to_string(node);

  // 1. World rank 0 divides the units by their costs and tells the others.
  std::vector<uint64_t> costs;
  int producers = 1;
  Status st = Guarded([&]() -> Status {
    GRIDFEED_ASSIGN_OR_RETURN(costs, pipeline->WholeShareUnits());
    GRIDFEED_ASSIGN_OR_RETURN(producers, config::TableProducers(options.feed, num_leaders));
    return Status::Ok();
  });
  // World rank 0's count sizes every plan: a leader whose files give another count (OLMo's
  // epochs follow its files' sizes) fails here, agreed, instead of in a mismatched broadcast.
  int64_t count = static_cast<int64_t>(costs.size());
  GRIDFEED_RETURN_IF_ERROR(parallel::MpiStatus(MPI_Bcast(&count, 1, MPI_INT64_T, 0, leaders),
                                               "MPI_Bcast(table producers' unit count)"));
  if (st.ok() && static_cast<int64_t>(costs.size()) != count) {
    st = FailedPrecondition("the build divides into " + std::to_string(costs.size()) +
                            " units here, " + std::to_string(count) +
                            " on world rank 0: its files differ from world rank 0's");
  }
  if (!st.ok()) st = st.WithContext(who);
  std::vector<int> owner(static_cast<size_t>(std::max<int64_t>(count, 0)), 0);
  if (node == 0 && st.ok()) {
    st = Guarded([&] {
      owner = order::PlanProducers(costs, producers);
      return Status::Ok();
    });
  }
  GRIDFEED_RETURN_IF_ERROR(agree(st));
  GRIDFEED_RETURN_IF_ERROR(parallel::MpiStatus(
      MPI_Bcast(owner.data(), static_cast<int>(owner.size()), MPI_INT, 0, leaders),
      "MPI_Bcast(table producers' units)"));

  // 2. This producer's share: what every producer builds and its own units' tables.
  std::unique_ptr<order::BuiltOrder> share;
  GRIDFEED_RETURN_IF_ERROR(BuildProducerShare(
      leaders, node,
      [&] {
        return pipeline->BuildWholeShare(
            [&](size_t unit) { return unit < owner.size() && owner[unit] == node; });
      },
      &share));

  // 3. Every producer learns the others' facts; 4. world rank 0 names the data (whole images:
  //    no node window start).
  int64_t length = 0;
  GRIDFEED_RETURN_IF_ERROR(AdoptProducersFacts(leaders, *share, &length));
  GRIDFEED_RETURN_IF_ERROR(MergeProducersDataFacts(leaders, node, *share, length, -1, facts));

  // 5. This producer's sections, the same bytes to every leader (itself included).
  std::vector<std::byte> sections;
  st = Guarded([&]() -> Status {
    GRIDFEED_ASSIGN_OR_RETURN(sections, share->WholeSections(node));
    if (node == options.feed.testing_corrupt_sections_producer && !sections.empty()) {
      sections.back() ^= std::byte{0x01};  // injected by a test, after the digest
    }
    return Status::Ok();
  });
  if (!st.ok()) st = st.WithContext(who);
  GRIDFEED_RETURN_IF_ERROR(agree(st));
  share->ReleaseShareTables();  // they travel in the sections, its own to itself too
  LogProducerMemory(node, "the sections");
  std::vector<std::vector<std::byte>> received;
  {
    const std::vector<std::span<const std::byte>> out(static_cast<size_t>(num_leaders),
                                                      std::span<const std::byte>(sections));
    GRIDFEED_RETURN_IF_ERROR(parallel::ExchangeBytes(leaders, world_rank, out, &received));
  }
  sections = {};
  LogProducerMemory(node, "the exchange");

  // 6. The whole image from every producer's sections (Distribute agrees on the outcome).
  return AssembledImage(node, order::Builders(owner),
                        [&] { return share->AssembleWholeImage(std::move(received)); });
}

}  // namespace gridfeed::feed
