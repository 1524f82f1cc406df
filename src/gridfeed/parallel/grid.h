// The DP x TP x PP x CP grid of a Megatron job as MPI communicators.
//
// World ranks map to (tp, cp, dp, pp) in Megatron's order "tp-cp-ep-dp-pp" (first = fastest;
// settable); ep is 1 here. Readers are the ranks with tp_rank 0 on the first or last pipeline
// stage (on every stage when middle stages receive fields): only they hold tables and open
// token files.
// Create is collective on `comm`, which is duplicated (never MPI_COMM_WORLD behind the
// caller's back). Every communicator is freed by the destructor. Not thread safe.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "gridfeed/core/status.h"

namespace gridfeed::parallel {

struct GridSizes {
  int tensor_model_parallel_size = 1;
  int pipeline_model_parallel_size = 1;
  int context_parallel_size = 1;
  std::string rank_order = "tp-cp-ep-dp-pp";
  // Middle pipeline stages receive fields too (order::FieldSchema::middle_stages: packed SFT's
  // cu_seqlens), so their TP rank 0 reads as well.
  bool middle_stages_read = false;
};

class Grid {
 public:
  // Collective on `comm`. An MPI failure of a communicator split is agreed: the same error on
  // every rank, naming the rank and the call. InvalidArgument (the same on every rank) if the sizes
  // do not divide the communicator or the order is not a permutation of tp, cp, ep, dp, pp.
  static Result<std::unique_ptr<Grid>> Create(MPI_Comm comm, const GridSizes& sizes);
  ~Grid();
  Grid(const Grid&) = delete;
  Grid& operator=(const Grid&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  int tp_rank() const { return tp_rank_; }
  int cp_rank() const { return cp_rank_; }
  int dp_rank() const { return dp_rank_; }
  int pp_rank() const { return pp_rank_; }
  int tp_size() const { return tp_; }
  int cp_size() const { return cp_; }
  int dp_size() const { return dp_; }
  int pp_size() const { return pp_; }
  bool first_stage() const { return pp_rank_ == 0; }
  bool last_stage() const { return pp_rank_ == pp_ - 1; }
  bool is_reader() const {
    return tp_rank_ == 0 && (first_stage() || last_stage() || middle_stages_read_);
  }

  MPI_Comm world() const { return world_; }
  MPI_Comm tp_comm() const { return tp_comm_; }
  MPI_Comm cp_comm() const { return cp_comm_; }
  MPI_Comm dp_comm() const { return dp_comm_; }
  MPI_Comm pp_comm() const { return pp_comm_; }
  // MPI_COMM_NULL on ranks that are not readers.
  MPI_Comm reader_comm() const { return reader_comm_; }

  // "dp 1/2 tp 0/2 pp 1/2 cp 0/1" for messages.
  std::string Describe() const;

 private:
  Grid() = default;
  int world_rank_ = 0, world_size_ = 1;
  int tp_ = 1, cp_ = 1, dp_ = 1, pp_ = 1;
  int tp_rank_ = 0, cp_rank_ = 0, dp_rank_ = 0, pp_rank_ = 0;
  bool middle_stages_read_ = false;
  MPI_Comm world_ = MPI_COMM_NULL, tp_comm_ = MPI_COMM_NULL, cp_comm_ = MPI_COMM_NULL,
           dp_comm_ = MPI_COMM_NULL, pp_comm_ = MPI_COMM_NULL, reader_comm_ = MPI_COMM_NULL;
};

// World rank -> coordinates for `order` (exposed for tests). Returns false on a bad order.
bool RankToCoordinates(int rank, const GridSizes& sizes, int dp, int* tp_rank, int* cp_rank,
                       int* dp_rank, int* pp_rank);

}  // namespace gridfeed::parallel
