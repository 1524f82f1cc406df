#include "gridfeed/parallel/grid.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "gridfeed/core/log.h"
#include "gridfeed/parallel/agree.h"

namespace gridfeed::parallel {
namespace {

std::vector<std::string> SplitOrder(const std::string& order) {
  std::vector<std::string> parts;
  std::stringstream ss(order);
  std::string p;
  while (std::getline(ss, p, '-')) parts.push_back(p);
  return parts;
}

bool ValidOrder(const std::string& order) {
  auto parts = SplitOrder(order);
  std::vector<std::string> want = {"cp", "dp", "ep", "pp", "tp"};
  std::sort(parts.begin(), parts.end());
  return parts == want;
}

}  // namespace

bool RankToCoordinates(int rank, const GridSizes& s, int dp, int* tp_rank, int* cp_rank,
                       int* dp_rank, int* pp_rank) {
  if (!ValidOrder(s.rank_order)) return false;
  int rest = rank;
  for (const auto& axis : SplitOrder(s.rank_order)) {
    int size = 1;
    int* out = nullptr;
    int ep_rank = 0;
    if (axis == "tp") size = s.tensor_model_parallel_size, out = tp_rank;
    if (axis == "cp") size = s.context_parallel_size, out = cp_rank;
    if (axis == "pp") size = s.pipeline_model_parallel_size, out = pp_rank;
    if (axis == "dp") size = dp, out = dp_rank;
    if (axis == "ep") size = 1, out = &ep_rank;
    *out = rest % size;
    rest /= size;
  }
  return true;
}

Result<std::unique_ptr<Grid>> Grid::Create(MPI_Comm comm, const GridSizes& s) {
  std::unique_ptr<Grid> g(new Grid());
  // A failed dup (collective) is the same on every rank of `comm` in practice; nothing to agree
  // over without a communicator.
  GRIDFEED_RETURN_IF_ERROR(MpiStatus(MPI_Comm_dup(comm, &g->world_), "MPI_Comm_dup"));
  MPI_Comm_set_errhandler(g->world_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(g->world_, &g->world_rank_);
  MPI_Comm_size(g->world_, &g->world_size_);
  log::SetRank(g->world_rank_, g->world_size_);  // library users get rank-tagged lines too
  g->tp_ = s.tensor_model_parallel_size;
  g->pp_ = s.pipeline_model_parallel_size;
  g->cp_ = s.context_parallel_size;
  // Every rank sees the same sizes, so every rank returns the same error (no collective yet
  // beyond the dup, which all ranks made).
  const int model = g->tp_ * g->pp_ * g->cp_;
  if (g->tp_ < 1 || g->pp_ < 1 || g->cp_ < 1) {
    return InvalidArgument("parallel sizes must be >= 1");
  }
  if (g->world_size_ % model != 0) {
    return InvalidArgument("world size " + std::to_string(g->world_size_) +
                           " is not divisible by TP x PP x CP = " + std::to_string(g->tp_) + " x " +
                           std::to_string(g->pp_) + " x " + std::to_string(g->cp_) + " = " +
                           std::to_string(model));
  }
  g->dp_ = g->world_size_ / model;
  if (!RankToCoordinates(g->world_rank_, s, g->dp_, &g->tp_rank_, &g->cp_rank_, &g->dp_rank_,
                         &g->pp_rank_)) {
    return InvalidArgument("--rank-order '" + s.rank_order +
                           "' is not an order of tp, cp, ep, dp, pp (e.g. tp-cp-ep-dp-pp)");
  }
  g->middle_stages_read_ = s.middle_stages_read;
  // A group shares every coordinate but its own; colours encode the others.
  auto color = [&](int skip) {
    const int c[4] = {g->tp_rank_, g->cp_rank_, g->dp_rank_, g->pp_rank_};
    const int n[4] = {g->tp_, g->cp_, g->dp_, g->pp_};
    int v = 0;
    for (int i = 3; i >= 0; --i) {
      if (i == skip) continue;
      v = v * n[i] + c[i];
    }
    return v;
  };
  // Every split is made on every rank whatever an earlier one returned (they are collective);
  // the first failure is then agreed, so every rank returns the same error.
  Status made;
  auto split = [&](int colour, int key, MPI_Comm* out, const char* name) {
    const Status st = MpiStatus(MPI_Comm_split(g->world_, colour, key, out), name);
    if (made.ok() && !st.ok()) made = st;
  };
  split(color(0), g->tp_rank_, &g->tp_comm_, "MPI_Comm_split(tp)");
  split(color(1), g->cp_rank_, &g->cp_comm_, "MPI_Comm_split(cp)");
  split(color(2), g->dp_rank_, &g->dp_comm_, "MPI_Comm_split(dp)");
  split(color(3), g->pp_rank_, &g->pp_comm_, "MPI_Comm_split(pp)");
  split(g->is_reader() ? 0 : MPI_UNDEFINED, g->world_rank_, &g->reader_comm_,
        "MPI_Comm_split(readers)");
  for (MPI_Comm c : {g->tp_comm_, g->cp_comm_, g->dp_comm_, g->pp_comm_, g->reader_comm_}) {
    if (c != MPI_COMM_NULL) MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  }
  GRIDFEED_RETURN_IF_ERROR(AgreeOnStatus(g->world_, made, g->world_rank_));
  return g;
}

Grid::~Grid() {
  for (MPI_Comm* c : {&tp_comm_, &cp_comm_, &dp_comm_, &pp_comm_, &reader_comm_, &world_}) {
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }
}

std::string Grid::Describe() const {
  return "dp " + std::to_string(dp_rank_) + "/" + std::to_string(dp_) + " tp " +
         std::to_string(tp_rank_) + "/" + std::to_string(tp_) + " pp " + std::to_string(pp_rank_) +
         "/" + std::to_string(pp_) + " cp " + std::to_string(cp_rank_) + "/" + std::to_string(cp_);
}

}  // namespace gridfeed::parallel
