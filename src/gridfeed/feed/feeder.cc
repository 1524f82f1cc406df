// The Feeder's construction, abandonment and accessors; its phases live in feeder_startup.cc,
// feeder_resume.cc and feeder_read.cc (state: feeder_impl.h).
#include "gridfeed/feed/feeder_impl.h"

namespace gridfeed::feed {

Feeder::Feeder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Feeder::~Feeder() = default;

void Feeder::Abandon(std::unique_ptr<Feeder> feeder) {
  if (!feeder) return;
  feeder->impl_->StopPrefetch();
  static_cast<void>(feeder.release());  // its MPI handles are the job's end to free
}

int64_t Feeder::consumed_samples() const { return impl_->consumed; }
const parallel::Grid& Feeder::grid() const { return *impl_->grid; }
const StartupTimes& Feeder::startup() const { return impl_->startup; }
int64_t Feeder::split_length() const { return impl_->split_length; }
int64_t Feeder::resumed_iteration() const { return impl_->resumed_iteration; }
const std::string& Feeder::fingerprint() const { return impl_->fingerprint; }
const std::string& Feeder::canonical_config() const { return impl_->canonical; }
const FeederOptions& Feeder::options() const { return impl_->options; }
const order::ReadSchedule& Feeder::schedule() const { return *impl_->schedule; }
const std::string& Feeder::schedule_history() const { return impl_->schedule_history; }
int64_t Feeder::num_microbatches_per_global_batch() const {
  return impl_->schedule->micro_batches_per_iteration();
}
size_t Feeder::table_bytes_on_node() const { return impl_->image->node_bytes(); }
int Feeder::readers_on_node() const { return impl_->image->readers_on_node(); }
int Feeder::num_nodes() const { return impl_->image->num_nodes(); }
const std::vector<int>& Feeder::readers_per_node() const {
  return impl_->image->readers_per_node();
}
const PayloadLayout& Feeder::payload_layout() const { return impl_->layout; }
const order::SeqLengths& Feeder::seq_lengths() const { return impl_->seq_lengths; }
int64_t Feeder::max_seq_length() const { return impl_->layout.seq_length; }

int Feeder::num_open_token_files() const {
  return impl_->view && impl_->grid->is_reader()
             ? static_cast<int>(impl_->view->token_stores().size())
             : 0;
}
bool Feeder::holds_tables() const { return !impl_->image->bytes().empty(); }

}  // namespace gridfeed::feed
