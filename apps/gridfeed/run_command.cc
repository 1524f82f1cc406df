// gridfeed run: the feeder without a trainer, under mpirun/srun. Consumes global batches,
// checks on every rank what it received (TP peers identical, DP ranks disjoint and covering
// each step, CP ranks on the same samples), reports start-up and steady-state rates, and
// with --dump writes what every rank received.
#include <mpi.h>
#include <sys/resource.h>
#include <xxhash.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "gridfeed/audit/ledger.h"
#include "gridfeed/config/flags.h"
#include "gridfeed/core/log.h"
#include "gridfeed/core/stopwatch.h"
#include "gridfeed/feed/feeder.h"
#include "gridfeed/feed/run_length.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/io/npy.h"
#include "gridfeed/parallel/agree.h"
#include "mpi_job.h"

namespace gridfeed::app {
namespace {

// User + system CPU seconds of this process (all its threads).
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Options of `run` alone (the job's options come from the option table).
struct RunArgs {
  std::string dump_dir;
  std::string save_path;
  int64_t kill_rank = -1, kill_step = -1;
  // Tests only: a ledger writer's Nth record (from 1) fails to append, as on a full disk.
  int64_t fail_ledger_record = -1;
  // Every rank must take the same paths: they decide collectives (dump agreement, saves).
  std::string AgreementText() const {
    return dump_dir + '\n' + save_path + '\n' + std::to_string(kill_step);
  }
};

// What a rank received, micro-batch after micro-batch, field by field as its schema declares.
struct Dump {
  struct Field {
    const order::FieldSpec* spec = nullptr;
    std::vector<int64_t> shape;    // one micro-batch's (fixed fields)
    std::vector<std::byte> bytes;  // every micro-batch's values back to back
    std::vector<int64_t> counts;   // variable fields: each micro-batch's entries
  };
  std::vector<int64_t> sample_indices;
  std::vector<int64_t> local_seq_lengths;  // per micro-batch (mixture stages may differ)
  std::vector<Field> fields;               // a stage receives the same fields every step
  bool packed = false;
  int64_t count = 0;
  void Add(const feed::MicroBatch& mb) {
    ++count;
    packed = packed || mb.packed;
    local_seq_lengths.push_back(mb.local_seq_length);
    sample_indices.insert(sample_indices.end(), mb.sample_indices.begin(), mb.sample_indices.end());
    if (fields.empty()) {
      for (const feed::FieldArray& f : mb.fields) fields.push_back({f.spec, f.shape, {}, {}});
    }
    for (size_t i = 0; i < mb.fields.size() && i < fields.size(); ++i) {
      const feed::FieldArray& f = mb.fields[i];
      const std::byte* data = mb.payload.data() + f.offset;
      fields[i].bytes.insert(fields[i].bytes.end(), data, data + f.bytes);
      if (f.spec->shape == order::FieldShape::kVariable) fields[i].counts.push_back(f.shape[0]);
    }
  }
};

// Ends the job from one rank when the ranks can no longer agree (last resort).
[[noreturn]] void Abort(const parallel::Grid& g, const std::string& message) {
  std::fprintf(stderr, "gridfeed run: error: rank %d (%s): %s\n", g.world_rank(),
               g.Describe().c_str(), message.c_str());
  std::fflush(stderr);
  MPI_Abort(g.world(), 1);
  std::abort();
}

Status WriteDump(const std::string& dir, const feed::Feeder& f, const Dump& d) {
  const auto& g = f.grid();
  const std::string rd = dir + "/rank" + std::to_string(g.world_rank());
  GRIDFEED_RETURN_IF_ERROR(io::MakeDirs(rd));
  const int64_t n = d.count;
  const int64_t mbs =
      n ? static_cast<int64_t>(d.sample_indices.size()) / std::max<int64_t>(n, 1) : 0;
  nlohmann::json meta = {{"world_rank", g.world_rank()}, {"dp_rank", g.dp_rank()},
                         {"tp_rank", g.tp_rank()},       {"pp_rank", g.pp_rank()},
                         {"cp_rank", g.cp_rank()},       {"micro_batches", n},
                         {"is_reader", g.is_reader()}};
  std::vector<std::string> names;
  if (!d.sample_indices.empty()) {
    GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(rd + "/sample_indices.npy", d.sample_indices, {n, mbs}));
    // Micro-batches of several lengths (mixture stages with their own seq_length) do not make
    // one array: each field is then written flat, with local_seq_lengths.npy giving each one's
    // length.
    const bool ragged = std::adjacent_find(d.local_seq_lengths.begin(), d.local_seq_lengths.end(),
                                           std::not_equal_to<>()) != d.local_seq_lengths.end();
    if (ragged) {
      meta["ragged"] = true;
      GRIDFEED_RETURN_IF_ERROR(
          io::WriteNpy(rd + "/local_seq_lengths.npy", d.local_seq_lengths, {n}));
    }
    if (d.packed) meta["packed"] = true;
    for (const Dump::Field& field : d.fields) {
      const order::FieldSpec& spec = *field.spec;
      const int64_t elements =
          static_cast<int64_t>(field.bytes.size() / order::DTypeSize(spec.dtype));
      std::vector<int64_t> shape;
      if (spec.shape == order::FieldShape::kVariable) {
        // Variable length (cu_seqlens): every micro-batch's values flat, with each one's count.
        shape = {elements};
        GRIDFEED_RETURN_IF_ERROR(
            io::WriteNpy(rd + "/num_" + spec.name + ".npy", field.counts, {n}));
      } else if (spec.shape == order::FieldShape::kScalar) {
        shape = {n};
      } else if (ragged) {
        shape = {elements};
      } else {
        shape = {n};
        shape.insert(shape.end(), field.shape.begin(), field.shape.end());
      }
      names.push_back(spec.name);
      GRIDFEED_RETURN_IF_ERROR(io::WriteNpy(rd + "/" + spec.name + ".npy",
                                            order::DumpDescr(spec.dtype), shape, field.bytes.data(),
                                            field.bytes.size()));
    }
  }
  meta["fields"] = names;
  return io::WriteStringToFile(rd + "/meta.json", meta.dump(2) + "\n");
}

Status RunFeeder(const RunArgs& a, const config::OptionFlags& flags) {
  // Options that differ per rank would leave ranks in different collectives: agreed first.
  auto resolved = flags.Resolve();
  const std::string local = a.AgreementText();
  if (!parallel::AllEqual(MPI_COMM_WORLD, XXH3_64bits(local.data(), local.size()))) {
    return InvalidArgument("the ranks were given different --dump, --save or testing options");
  }
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  GRIDFEED_RETURN_IF_ERROR(parallel::AgreeOnStatus(
      MPI_COMM_WORLD, resolved.ok() ? Status::Ok() : resolved.status(), world_rank));
  const config::JobOptions& options = *resolved;
  // An unwritable --save folder is found now, not at the first save (world rank 0 saves).
  Status writable;
  if (world_rank == 0 && !a.save_path.empty()) {
    auto probe = io::TempFile::Create(a.save_path);
    if (probe.ok()) {
      probe->Discard();
    } else {
      writable = probe.status().WithContext("--save");
    }
  }
  GRIDFEED_RETURN_IF_ERROR(parallel::AgreeOnStatus(MPI_COMM_WORLD, writable, world_rank));
  Stopwatch open_watch;
  const double cpu_before = CpuSeconds();
  GRIDFEED_ASSIGN_OR_RETURN(std::unique_ptr<feed::Feeder> f,
                            feed::Feeder::Open(options, MPI_COMM_WORLD));
  const double open_total = open_watch.Seconds();
  // CPU time of start-up: rank 0 builds; the others should mostly sleep while it does.
  const double open_cpu = CpuSeconds() - cpu_before;
  double others_cpu = 0;
  const double mine = world_rank == 0 ? 0 : open_cpu;
  MPI_Reduce(&mine, &others_cpu, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  const auto& g = f->grid();
  const int64_t per_step = f->num_microbatches_per_global_batch();
  const int64_t mbs = f->options().batch.micro_batch_size;  // as the feeder resolved it
  const int64_t dp = g.dp_size();
  const int64_t train_iters = options.run.train_iters;
  const int64_t save_interval = options.run.save_interval;
  // A run the data cannot complete is refused before its first step (the same on every rank).
  GRIDFEED_RETURN_IF_ERROR(feed::CheckTrainItersFit(*f, train_iters));
  const bool cyclic = options.data.dataloader_type == "cyclic";
  Dump dump;
  int64_t micro_batches = 0, steady_tokens = 0;  // tokens of the micro-batches after the first
  Stopwatch steady;
  // The ledger: one file per DP rank, written by the rank that receives its records.
  std::unique_ptr<audit::LedgerWriter> ledger;
  Status ledger_status;        // the first failed append or flush on this rank
  int64_t ledger_records = 0;  // records appended by this rank
  if (!options.run.ledger.empty()) {
    GRIDFEED_ASSIGN_OR_RETURN(
        ledger,
        audit::OpenJobLedger(g.is_reader() && g.first_stage() && g.cp_rank() == 0,
                             options.run.ledger, g.dp_rank(), f->fingerprint(),
                             f->canonical_config(), f->schedule(), f->schedule_history(),
                             {!options.resume.resume_from.empty(), options.run.overwrite_ledger},
                             [&g](const Status& local) {
                               return parallel::AgreeOnStatus(g.world(), local, g.world_rank());
                             }));
  }
  const int64_t first_iter = f->resumed_iteration();
  if (g.world_rank() == 0 && !options.resume.resume_from.empty()) {
    std::printf("resumed from %s at iteration %lld, %lld consumed samples\n",
                options.resume.resume_from.c_str(), static_cast<long long>(first_iter),
                static_cast<long long>(f->consumed_samples()));
  }
  if (g.world_rank() == 0 && first_iter >= train_iters) {
    std::printf("nothing to run: the checkpoint is at iteration %lld, --train-iters is %lld\n",
                static_cast<long long>(first_iter), static_cast<long long>(train_iters));
  }
  for (int64_t it = first_iter; it < train_iters; ++it) {
    for (int64_t m = 0; m < per_step; ++m) {
      if (it == a.kill_step && g.world_rank() == a.kill_rank) std::raise(SIGKILL);
      const int64_t base = f->consumed_samples();
      auto mb = f->Next();
      if (!mb.ok()) {
        // Deterministic on every rank (same cursor arithmetic), so all stop here together.
        if (mb.status().code() == StatusCode::kOutOfRange) {
          return mb.status().WithContext("at iteration " + std::to_string(it) +
                                         " (lower --train-iters)");
        }
        Abort(g, mb.status().ToString());
      }
      if (++micro_batches == 2) steady.Lap();
      if (micro_batches >= 2) steady_tokens += mbs * mb->seq_length;
      if (mb->empty()) continue;  // middle pipeline stage: nothing received, nothing to check
      if (mb->device_payload != nullptr) {
        // Device path: the checks and the dump look at a host copy of what reached the device.
        auto bytes = f->DevicePayloadToHost(*mb);
        if (!bytes.ok()) Abort(g, bytes.status().ToString());
        f->payload_layout().Unpack(std::move(*bytes), &*mb);
      }
      if (!parallel::AllEqual(g.tp_comm(), mb->Digest()))
        Abort(g, "TP peers received different data");
      uint64_t idx_hash = XXH3_64bits(mb->sample_positions.data(), mb->sample_positions.size() * 8);
      if (!parallel::AllEqual(g.cp_comm(), idx_hash))
        Abort(g, "CP peers received different samples");
      std::vector<int64_t> all(static_cast<size_t>(mbs * dp));
      MPI_Allgather(mb->sample_positions.data(), static_cast<int>(mbs), MPI_INT64_T, all.data(),
                    static_cast<int>(mbs), MPI_INT64_T, g.dp_comm());
      std::sort(all.begin(), all.end());
      // single: the DP ranks cover the step's global positions exactly; cyclic with sharding:
      // disjoint buckets (without sharding an epoch's end may repeat a sample by design).
      for (int64_t k = 0; k < mbs * dp; ++k) {
        const bool bad = cyclic ? (!options.data.no_data_sharding && k > 0 && all[k] == all[k - 1])
                                : all[k] != base + k;
        if (bad) {
          std::string got;
          for (auto v : all) got += " " + std::to_string(v);
          Abort(g, "DP ranks' samples are not disjoint or do not cover [" + std::to_string(base) +
                       ", " + std::to_string(base + mbs * dp) + "): got" + got);
        }
      }
      if (!a.dump_dir.empty()) dump.Add(*mb);
      // A failed append stops the writer's appends; the failure is agreed at the next flush,
      // before any checkpoint could cover records the ledger lacks.
      if (ledger && ledger_status.ok()) {
        for (const auto& r : mb->records) {
          if (++ledger_records == a.fail_ledger_record) {
            ledger_status = IoError("cannot write ledger record " + std::to_string(ledger_records) +
                                    " to '" + options.run.ledger + "' (injected by test)");
          } else {
            ledger_status = ledger->Append(r);
          }
          if (!ledger_status.ok()) break;
        }
      }
    }
    const bool last = it + 1 == train_iters;
    const bool save =
        !a.save_path.empty() && (last || (save_interval > 0 && (it + 1) % save_interval == 0));
    // The ledger is durable at every checkpoint (and at the end), so a crash loses nothing
    // that a checkpoint covers.
    // Collective on the world (every rank reaches the same iterations): all stop together,
    // with the writer's error, when any ledger file is not complete and durable.
    if (!options.run.ledger.empty() && (save || last)) {
      if (ledger && ledger_status.ok()) ledger_status = ledger->Flush();
      GRIDFEED_RETURN_IF_ERROR(
          parallel::AgreeOnStatus(g.world(), ledger_status, g.world_rank())
              .WithContext("the ledger at iteration " + std::to_string(it + 1)));
    }
    if (save) {
      GRIDFEED_RETURN_IF_ERROR(f->SaveCheckpoint(a.save_path, it + 1));
    }
  }
  const double steady_seconds = micro_batches > 1 ? steady.Seconds() : 0;
  if (!a.dump_dir.empty()) {
    Status st = WriteDump(a.dump_dir, *f, dump);
    GRIDFEED_RETURN_IF_ERROR(parallel::AgreeOnStatus(g.world(), st, g.world_rank()));
  }
  // Table memory: what this node holds in its shared window vs a plain copy per reader.
  const double node_mb = f->table_bytes_on_node() / 1e6;
  const double plain_mb = node_mb * f->readers_on_node();
  if (g.world_rank() == 0) {
    std::string per_node;
    for (int n : f->readers_per_node())
      per_node += (per_node.empty() ? "" : " ") + std::to_string(n);
    const auto& s = f->startup();
    const double rate = steady_seconds > 0 ? (micro_batches - 1) / steady_seconds : 0;
    std::printf(
        "run: %d ranks (TP %d x PP %d x CP %d x DP %d), %lld iteration%s x %lld micro-batch%s "
        "of %lld, consumed %lld samples\n"
        "start-up: %.3f s (build %.3f s, broadcast %.3f s, open %.3f s); CPU: rank 0 %.2f s, "
        "the other ranks %.2f s in all\n"
        "table memory on rank 0's node: %.1f MB in one shared window for %d readers (a plain "
        "copy per reader: %.1f MB)\n"
        "table windows: %d (one per node, each filled by its leader; readers per node: %s)\n"
        "steady state per reader: %.1f micro-batches/s, %.3g tokens/s\n"
        "checks: TP peers identical, DP ranks disjoint and covering, CP peers aligned: ok\n",
        g.world_size(), g.tp_size(), g.pp_size(), g.cp_size(), g.dp_size(),
        static_cast<long long>(train_iters), train_iters == 1 ? "" : "s",
        static_cast<long long>(per_step), per_step == 1 ? "" : "es", static_cast<long long>(mbs),
        static_cast<long long>(f->consumed_samples()), open_total, s.build_seconds,
        s.broadcast_seconds, s.open_seconds, open_cpu, others_cpu, node_mb, f->readers_on_node(),
        plain_mb, f->num_nodes(), per_node.c_str(), rate,
        steady_seconds > 0 ? static_cast<double>(steady_tokens) / steady_seconds : 0.0);
    std::printf(
        "tables built by %d producer%s; the largest process's peak memory: %.1f MB; "
        "image digest %016llx\n",
        s.producers, s.producers == 1 ? "" : "s", s.max_peak_rss_bytes / 1e6,
        static_cast<unsigned long long>(s.image_digest));
    if (!a.dump_dir.empty()) std::printf("dump: %s/rank<N>/\n", a.dump_dir.c_str());
  }
  return Status::Ok();
}

}  // namespace

Runner RegisterRun(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("run", "Feed a DP x TP x PP x CP grid (under mpirun)");
  auto flags = std::make_shared<config::OptionFlags>(sub, config::Groups::All());
  auto a = std::make_shared<RunArgs>();
  sub->add_option("--dump", a->dump_dir, "Every rank writes what it received here");
  sub->add_option("--save", a->save_path,
                  "HDF5 checkpoint of the cursor (at the end and every "
                  "--save-interval iterations)");
  sub->add_option("--testing-kill-rank", a->kill_rank)->group("");
  sub->add_option("--testing-kill-step", a->kill_step)->group("");
  sub->add_option("--testing-fail-ledger-record", a->fail_ledger_record)->group("");
  return [a, flags]() -> Status {
    return RunMpiJob("gridfeed run", [&] {
      GRIDFEED_RETURN_IF_ERROR(io::RemoveTempFilesOnSignal());
      return RunFeeder(*a, *flags);
    });
  };
}

}  // namespace gridfeed::app
