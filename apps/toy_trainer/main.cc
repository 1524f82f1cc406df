// toy_trainer: a small transformer trained on data fed by gridfeed over a DP x TP x PP x CP
// grid. DP: real gradient all-reduce over gridfeed's DP communicator. PP = 2: a real stage
// split (activations forward, gradients backward over MPI, all forwards then all backwards).
// TP and CP: weights replicated; the trainer checks that TP peers got identical micro-batches
// and reassembles the CP ranks' zigzag chunks into the full sequence. Checkpoints hold the
// model and optimizer (libtorch) and gridfeed's HDF5 cursor; --load resumes exactly.
// Packed micro-batches (--sft): one flattened row of micro_batch_size x seq_length tokens whose
// documents cu_seqlens delimits; attention is causal within each document only, the loss the
// loss_mask-weighted mean (labels -100 clamped and masked out first). At CP > 1 each rank holds
// the THD slice (every sequence cut into 2 x CP chunks, rank r keeping chunks r and 2CP-1-r);
// the trainer reassembles the whole row from the CP ranks, as it does the zigzag chunks.
#include <mpi.h>
#include <torch/torch.h>
#include <xxhash.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <span>

#include "gridfeed/audit/ledger.h"
#include "gridfeed/config/flags.h"
#include "gridfeed/config/mixture_schedule.h"
#include "gridfeed/core/parse.h"
#include "gridfeed/feed/feeder.h"
#include "gridfeed/feed/payload.h"
#include "gridfeed/feed/run_length.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/order/cp_thd.h"
#include "gridfeed/parallel/agree.h"
#include "model.h"

namespace gridfeed::toy {
namespace {

// The trainer's own options (the job's come from gridfeed's option table).
struct Args {
  std::string save_dir, load_dir, loss_log;
  int64_t kill_after_step = -1;  // tests only: SIGKILL world rank 1 once this step is saved
  // Tests only (one pipeline stage): every document of a packed row gives the logits it gives
  // alone, i.e. attention never crosses a cu_seqlens boundary.
  bool check_documents = false;
  double lr = 1e-3;
  int64_t layers = 2, d_model = 128;
};

[[noreturn]] void Fail(const std::string& m) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "toy_trainer: error (rank %d): %s\n", rank, m.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

// An error every rank has (agreed): each prints it, all meet, and Run returns 1 on every rank
// (the feeder is then destroyed on every rank at the same point).
int Stop(const Status& agreed) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "toy_trainer: error (rank %d): %s\n", rank, agreed.ToString().c_str());
  std::fflush(stderr);
  MPI_Barrier(MPI_COMM_WORLD);
  return 1;
}

// [B, S/cp] zigzag chunks of every CP rank -> [B, S]: chunk c of 2cp lives on rank c (first
// half of its slice) or on rank 2cp-1-c (second half).
torch::Tensor Reassemble(const torch::Tensor& local, const parallel::Grid& g) {
  const int64_t cp = g.cp_size();
  if (cp == 1) return local;
  auto t = local.contiguous();
  auto all = torch::empty({cp, t.size(0), t.size(1)}, t.options());
  MPI_Datatype type = t.scalar_type() == torch::kFloat ? MPI_FLOAT : MPI_INT64_T;
  MPI_Allgather(t.data_ptr(), static_cast<int>(t.numel()), type, all.data_ptr(),
                static_cast<int>(t.numel()), type, g.cp_comm());
  const int64_t chunk = t.size(1) / 2;
  std::vector<torch::Tensor> pieces;
  for (int64_t c = 0; c < 2 * cp; ++c) {
    const int64_t r = c < cp ? c : 2 * cp - 1 - c;
    const int64_t half = c < cp ? 0 : 1;
    pieces.push_back(all[r].narrow(1, half * chunk, chunk));
  }
  return torch::cat(pieces, 1);
}

// A packed row: [1, total/cp] THD slice of every CP rank -> [1, total], each rank's values put
// back at the positions thd_get_partitioned_indices gives it.
torch::Tensor ReassembleThd(const torch::Tensor& local, std::span<const int32_t> cu, int64_t total,
                            const parallel::Grid& g) {
  const int64_t cp = g.cp_size();
  if (cp == 1) return local;
  auto t = local.contiguous();
  if (t.numel() * cp != total) {
    Fail("a packed micro-batch slice of " + std::to_string(t.numel()) + " tokens at CP " +
         std::to_string(cp) + " for a row of " + std::to_string(total));
  }
  auto all = torch::empty({cp, t.numel()}, t.options());
  MPI_Datatype type = t.scalar_type() == torch::kFloat ? MPI_FLOAT : MPI_INT64_T;
  MPI_Allgather(t.data_ptr(), static_cast<int>(t.numel()), type, all.data_ptr(),
                static_cast<int>(t.numel()), type, g.cp_comm());
  std::vector<int64_t> where;
  where.reserve(static_cast<size_t>(total));
  for (int64_t r = 0; r < cp; ++r) {
    auto idx = order::ThdPartitionedIndices(cu, total, cp, r);
    if (!idx.ok())
      Fail("packed micro-batch at CP " + std::to_string(cp) + ": " + idx.status().ToString());
    if (static_cast<int64_t>(idx->size()) != t.numel()) Fail("THD slice sizes disagree");
    where.insert(where.end(), idx->begin(), idx->end());
  }
  std::vector<char> seen(static_cast<size_t>(total), 0);
  for (int64_t p : where) {
    if (p < 0 || p >= total || seen[static_cast<size_t>(p)]++) {
      Fail("the CP ranks' THD slices do not partition the packed row");
    }
  }
  auto index = torch::from_blob(where.data(), {total}, torch::kInt64);
  return torch::empty({1, total}, t.options()).index_copy_(1, index, all.reshape({1, total}));
}

// Ids of a packed row must index the model's tables (embedding, positions, softmax).
void CheckIds(const torch::Tensor& ids, int64_t limit, const std::string& what,
              const std::string& hint) {
  const int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
  if (lo < 0 || hi >= limit) {
    Fail(what + " " + std::to_string(lo < 0 ? lo : hi) + " outside 0.." +
         std::to_string(limit - 1) + hint);
  }
}

torch::Tensor Tensor64(std::span<const int64_t> v, int64_t b, int64_t s) {
  return torch::from_blob(const_cast<int64_t*>(v.data()), {b, s}, torch::kInt64).clone();
}

// --testing-check-documents: each document [cu[i], cu[i+1]) of the packed row, run alone
// (causal, its own positions), has the logits it has in the row. Returns the documents checked.
int64_t CheckDocuments(Stage& stage, const torch::Tensor& tokens, const torch::Tensor& positions,
                       const torch::Tensor& logits, const feed::MicroBatch& mb) {
  if (!stage->first() || !stage->last()) Fail("--testing-check-documents needs one pipeline stage");
  torch::NoGradGuard no_grad;
  int64_t checked = 0;
  const auto cu = mb.cu_seqlens();
  for (size_t i = 0; i + 1 < cu.size(); ++i) {
    const int64_t start = cu[i], len = cu[i + 1] - cu[i];
    if (len == 0) continue;
    auto alone = stage->forward(tokens.narrow(1, start, len), positions.narrow(1, start, len));
    auto in_row = logits.detach().narrow(0, start, len);
    const double diff = (alone - in_row).abs().max().item<double>();
    if (!(diff <= 1e-4)) {
      Fail("document " + std::to_string(i) + " [" + std::to_string(start) + ", " +
           std::to_string(start + len) + ") of a packed row: logits differ from the document " +
           "alone by " + std::to_string(diff) + " (attention crosses documents)");
    }
    ++checked;
  }
  return checked;
}

void CheckTpPeers(const feed::MicroBatch& mb, const parallel::Grid& g) {
  if (!parallel::AllEqual(g.tp_comm(), mb.Digest()))
    Fail("TP peers received different micro-batches");
}

// The order's source names, by source id: a mixture schedule's sources, or the prefixes of
// --data-path (Megatron's "[W1] P1 [W2 P2 ...]"). One name: the order is not a blend.
std::vector<std::string> SourceNames(const config::DataOptions& d) {
  std::vector<std::string> names;
  if (!d.mixture_schedule.empty()) {
    auto schedule = config::ParseMixtureSchedule(d.mixture_schedule);
    if (!schedule.ok()) Fail("--mixture-schedule: " + schedule.status().ToString());
    for (const auto& s : schedule->sources) names.push_back(s.name);
    return names;
  }
  if (d.data_path.size() == 1) return d.data_path;
  for (size_t i = 1; i < d.data_path.size(); i += 2) names.push_back(d.data_path[i]);
  return names;
}

uint64_t ParamHash(Stage& stage) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (const auto& p : stage->parameters()) {
    auto c = p.detach().contiguous();
    XXH3_64bits_update(st, c.data_ptr(), c.numel() * c.element_size());
  }
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

int Run(const Args& a, const config::OptionFlags& flags) {
  auto resolved = flags.Resolve();
  if (!resolved.ok()) Fail(resolved.status().ToString());
  feed::FeederOptions options = *resolved;
  // The trainer's own options decide collectives too (saves, loads): every rank must agree.
  const std::string mine =
      a.save_dir + '\n' + a.load_dir + '\n' + std::to_string(a.kill_after_step);
  if (!parallel::AllEqual(MPI_COMM_WORLD, XXH3_64bits(mine.data(), mine.size()))) {
    Fail("the ranks were given different --save, --load or testing options");
  }
  std::string latest;
  if (!a.load_dir.empty()) {
    auto text = io::ReadFileToString(a.load_dir + "/latest");
    if (text.ok()) latest = text->substr(0, text->find('\n'));
    if (!text.ok() || latest.empty() || latest.find('/') != std::string::npos) {
      Fail("no checkpoint in '" + a.load_dir + "' (missing or empty 'latest')");
    }
    options.resume.resume_from = a.load_dir + "/" + latest + "/gridfeed.h5";
  }
  const int64_t train_iters = options.run.train_iters;
  const int64_t save_interval = options.run.save_interval;
  auto opened = feed::Feeder::Open(options, MPI_COMM_WORLD);
  if (!opened.ok()) return Stop(opened.status());
  auto& feeder = **opened;
  const auto& g = feeder.grid();
  if (g.pp_size() > 2) Fail("the toy trainer supports 1 or 2 pipeline stages");
  // The same answer on every rank (one schedule), so every rank stops here together.
  if (Status fits = feed::CheckTrainItersFit(feeder, train_iters); !fits.ok()) return Stop(fits);

  ModelConfig mc;
  mc.seq_length = feeder.max_seq_length();  // position embeddings for the longest stage
  mc.vocab_size = options.data.vocab_size > 0 ? options.data.vocab_size : 8000;
  mc.layers = a.layers;
  mc.d_model = a.d_model;
  torch::manual_seed(1234);  // the same initial weights on every rank
  // Build the whole model in one order so each stage's weights do not depend on the split.
  Stage whole(mc, true, true, 0, mc.layers);
  const bool first = g.first_stage(), last = g.last_stage();
  Stage stage(mc, first, last, first ? 0 : mc.layers / 2,
              g.pp_size() == 1 ? mc.layers : mc.layers / 2);
  {
    torch::NoGradGuard no_grad;
    auto src = whole->named_parameters();
    for (auto& p : stage->named_parameters()) {
      std::string name = p.key();
      if (!first && name.rfind("layers", 0) == 0) {
        // layersK.i.* in the second stage is layer K+i of the whole model.
        const auto dot = name.find('.');
        const auto dot2 = name.find('.', dot + 1);
        const auto k = ParseInt64(name.substr(6, dot - 6));
        const auto i = ParseInt64(name.substr(dot + 1, dot2 - dot - 1));
        if (!k || !i) Fail("unexpected parameter name '" + name + "'");  // a bug in the model
        name = "layers0." + std::to_string(*k + *i) + name.substr(dot2);
      }
      p.value().copy_(src[name]);
    }
  }
  torch::optim::AdamW opt(stage->parameters(), torch::optim::AdamWOptions(a.lr));
  if (!latest.empty()) {
    const std::string d = a.load_dir + "/" + latest;
    torch::load(stage, d + "/stage" + std::to_string(g.pp_rank()) + ".pt");
    torch::load(opt, d + "/stage" + std::to_string(g.pp_rank()) + "_optim.pt");
  }

  const bool logger = last && g.tp_rank() == 0 && g.cp_rank() == 0 && g.dp_rank() == 0;
  FILE* log = nullptr;
  if (logger && !a.loss_log.empty()) log = std::fopen(a.loss_log.c_str(), "a");
  // The ledger as `gridfeed run` and the Python Feeder open it: with the schedule history (an
  // amended mixture resumes), refusing a fresh run into a non-empty folder, locked; a failure on
  // any rank is the same error on every rank, which then ends together.
  std::unique_ptr<audit::LedgerWriter> ledger;
  if (!options.run.ledger.empty()) {
    auto w = audit::OpenJobLedger(
        g.is_reader() && g.first_stage() && g.cp_rank() == 0, options.run.ledger, g.dp_rank(),
        feeder.fingerprint(), feeder.canonical_config(), feeder.schedule(),
        feeder.schedule_history(),
        {!options.resume.resume_from.empty(), options.run.overwrite_ledger},
        [&g](const Status& local) {
          return parallel::AgreeOnStatus(g.world(), local, g.world_rank());
        });
    if (!w.ok()) return Stop(w.status());
    ledger = std::move(w).value();
  }
  const int64_t micro = feeder.num_microbatches_per_global_batch();
  // As the feeder resolved it (an OLMo device batch may set another than the option).
  const int64_t B = feeder.options().batch.micro_batch_size, D = mc.d_model;
  MPI_Comm pp = g.pp_comm();
  // Per-source loss (a blend of several sources): each sample's loss, averaged per source id.
  const std::vector<std::string> source_names = SourceNames(options.data);
  const size_t num_sources = source_names.size() > 1 ? source_names.size() : 0;
  for (int64_t step = feeder.resumed_iteration(); step < train_iters; ++step) {
    opt.zero_grad();
    std::vector<torch::Tensor> outs, ins, losses;
    // Each micro-batch's activation shape [length, rows, D]: [seq length (a stage may set its
    // own), B] or, packed, [B x seq length, 1].
    std::vector<int64_t> lengths, rows;
    int64_t documents = 0;                                  // --testing-check-documents
    std::vector<double> source_loss(2 * num_sources, 0.0);  // sums, then sample counts
    for (int64_t m = 0; m < micro; ++m) {
      auto mb = feeder.Next();
      if (!mb.ok()) Fail(mb.status().ToString());
      if (mb->device_payload != nullptr) {
        // --device-broadcast: the batch is in GPU memory; this CPU model reads a host copy.
        auto host = feeder.DevicePayloadToHost(*mb);
        if (!host.ok()) Fail(host.status().ToString());
        feeder.payload_layout().Unpack(std::move(*host), &*mb);
      }
      CheckTpPeers(*mb, g);
      if (ledger) {
        for (const auto& r : mb->records) {
          if (Status st = ledger->Append(r); !st.ok()) Fail(st.ToString());
        }
      }
      const int64_t local = mb->local_seq_length, S = mb->seq_length;
      const bool packed = mb->packed;
      const int64_t total = B * S;  // a packed row's tokens (all CP ranks together)
      lengths.push_back(packed ? total : S);
      rows.push_back(packed ? 1 : B);
      torch::Tensor attn;  // undefined: causal over each sample
      if (packed) {
        std::string error;
        attn = DocumentCausalMask(mb->cu_seqlens(), total, &error);
        if (!attn.defined()) Fail("packed micro-batch: " + error);
      }
      torch::Tensor x;
      if (first) {
        if (packed) {
          auto tokens =
              ReassembleThd(Tensor64(mb->tokens(), 1, B * local), mb->cu_seqlens(), total, g);
          auto positions =
              ReassembleThd(Tensor64(mb->position_ids(), 1, B * local), mb->cu_seqlens(), total, g);
          CheckIds(tokens, mc.vocab_size, "token id", " (set --vocab-size to the tokenizer's)");
          CheckIds(positions, mc.seq_length, "position id", "");
          x = stage->forward(tokens, positions, attn);
          if (a.check_documents) documents += CheckDocuments(stage, tokens, positions, x, *mb);
        } else {
          auto tokens = Reassemble(Tensor64(mb->tokens(), B, local), g);
          auto positions = Reassemble(Tensor64(mb->position_ids(), B, local), g);
          x = stage->forward(tokens, positions);
        }
      } else {
        x = torch::empty({lengths.back(), rows.back(), D});
        MPI_Recv(x.data_ptr(), static_cast<int>(x.numel()), MPI_FLOAT, 0, 0, pp, MPI_STATUS_IGNORE);
        x.requires_grad_(true);
        ins.push_back(x);
        x = stage->forward(x, torch::Tensor(), attn);
      }
      if (last) {
        torch::Tensor labels, mask;
        if (packed) {
          labels = ReassembleThd(Tensor64(mb->labels(), 1, B * local), mb->cu_seqlens(), total, g);
          mask = ReassembleThd(torch::from_blob(const_cast<float*>(mb->loss_mask().data()),
                                                {1, B * local}, torch::kFloat)
                                   .clone(),
                               mb->cu_seqlens(), total, g);
          std::tie(labels, mask) = SafeTargets(labels, mask);
          CheckIds(labels, mc.vocab_size, "label", " (set --vocab-size to the tokenizer's)");
        } else {
          labels = Reassemble(Tensor64(mb->labels(), B, local), g);
          mask = Reassemble(torch::from_blob(const_cast<float*>(mb->loss_mask().data()), {B, local},
                                             torch::kFloat)
                                .clone(),
                            g);
        }
        losses.push_back(MaskedLoss(x, labels, mask) / static_cast<double>(micro));
        if (num_sources > 0) {
          if (mb->source_ids.size() != static_cast<size_t>(B)) {
            Fail("a micro-batch for the loss carries " + std::to_string(mb->source_ids.size()) +
                 " source ids for " + std::to_string(B) + " samples");
          }
          // Packed: sample i is columns [i S, (i+1) S) of the row (logits are read flat).
          auto per_sample = packed ? PerSampleLoss(x, labels.reshape({B, S}), mask.reshape({B, S}))
                                   : PerSampleLoss(x, labels, mask);
          for (int64_t i = 0; i < B; ++i) {
            const int64_t id = mb->source_ids[static_cast<size_t>(i)];
            if (id < 0 || static_cast<size_t>(id) >= num_sources) {
              Fail("source id " + std::to_string(id) + " outside the " +
                   std::to_string(num_sources) + " sources of the order");
            }
            source_loss[static_cast<size_t>(id)] += per_sample[i].item<double>();
            source_loss[num_sources + static_cast<size_t>(id)] += 1.0;
          }
        }
      } else {
        auto h = x.detach().contiguous();
        MPI_Send(h.data_ptr(), static_cast<int>(h.numel()), MPI_FLOAT, 1, 0, pp);
        outs.push_back(x);
      }
    }
    for (int64_t m = 0; m < micro; ++m) {
      if (last) {
        losses[m].backward();
        if (!first) {
          auto grad = ins[m].grad().contiguous();
          MPI_Send(grad.data_ptr(), static_cast<int>(grad.numel()), MPI_FLOAT, 0, 1, pp);
        }
      } else {
        auto grad =
            torch::empty({lengths[static_cast<size_t>(m)], rows[static_cast<size_t>(m)], D});
        MPI_Recv(grad.data_ptr(), static_cast<int>(grad.numel()), MPI_FLOAT, 1, 1, pp,
                 MPI_STATUS_IGNORE);
        outs[m].backward(grad);
      }
    }
    // Data parallel: average the gradients.
    for (auto& p : stage->parameters()) {
      if (!p.grad().defined()) continue;
      auto grad = p.grad();
      MPI_Allreduce(MPI_IN_PLACE, grad.data_ptr(), static_cast<int>(grad.numel()), MPI_FLOAT,
                    MPI_SUM, g.dp_comm());
      grad.div_(static_cast<double>(g.dp_size()));
    }
    opt.step();
    if (last) {
      double loss = 0;
      for (auto& l : losses) loss += l.item<double>();
      MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, g.dp_comm());
      loss /= static_cast<double>(g.dp_size());
      if (num_sources > 0) {
        MPI_Allreduce(MPI_IN_PLACE, source_loss.data(), static_cast<int>(source_loss.size()),
                      MPI_DOUBLE, MPI_SUM, g.dp_comm());
      }
      if (logger) {
        // Per source: "name=loss" (nan when the step drew no sample of it) and its samples.
        std::string shown, logged;
        for (size_t k = 0; k < num_sources; ++k) {
          const double n = source_loss[num_sources + k];
          const double v = n > 0 ? source_loss[k] / n : std::nan("");
          char buf[160];
          std::snprintf(buf, sizeof(buf), "  %s %.4f (%lld)", source_names[k].c_str(), v,
                        static_cast<long long>(n));
          shown += buf;
          std::snprintf(buf, sizeof(buf), "\t%s=%.17g\t%s_samples=%lld", source_names[k].c_str(), v,
                        source_names[k].c_str(), static_cast<long long>(n));
          logged += buf;
        }
        std::printf("step %lld loss %.6f%s\n", static_cast<long long>(step + 1), loss,
                    shown.c_str());
        if (a.check_documents) {
          std::printf("step %lld: %lld documents give their logits alone\n",
                      static_cast<long long>(step + 1), static_cast<long long>(documents));
        }
        std::fflush(stdout);
        if (log) {
          std::fprintf(log, "%lld\t%.17g%s\n", static_cast<long long>(step + 1), loss,
                       logged.c_str());
          std::fflush(log);
        }
      }
    }
    const bool end = step + 1 == train_iters;
    const bool at_interval = save_interval > 0 && (step + 1) % save_interval == 0;
    if (ledger && (end || at_interval)) {
      if (Status st = ledger->Flush(); !st.ok()) Fail(st.ToString());
    }
    if (!a.save_dir.empty() && (end || at_interval)) {
      const std::string name = "step" + std::to_string(step + 1);
      const std::string d = a.save_dir + "/" + name;
      Status made;
      if (g.world_rank() == 0) made = io::MakeDirs(d);
      Status st = parallel::BroadcastStatus(g.world(), 0, made.WithContext("rank 0"));
      if (!st.ok()) Fail(st.ToString());
      Status saved;  // libtorch throws; its failure must reach every rank's agreement
      if (g.tp_rank() == 0 && g.cp_rank() == 0 && g.dp_rank() == 0) {
        try {
          torch::save(stage, d + "/stage" + std::to_string(g.pp_rank()) + ".pt");
          torch::save(opt, d + "/stage" + std::to_string(g.pp_rank()) + "_optim.pt");
        } catch (const std::exception& e) {
          saved = IoError("cannot save the model to '" + d + "': " + e.what());
        }
      }
      st = parallel::AgreeOnStatus(g.world(), saved, g.world_rank());
      if (!st.ok()) Fail(st.ToString());
      st = feeder.SaveCheckpoint(d + "/gridfeed.h5", step + 1);
      if (!st.ok()) Fail(st.ToString());
      MPI_Barrier(g.world());
      Status published;
      if (g.world_rank() == 0) {  // the checkpoint counts only once complete
        published = io::WriteStringToFile(a.save_dir + "/latest", name + "\n");
      }
      st = parallel::BroadcastStatus(g.world(), 0, published.WithContext("rank 0"));
      if (!st.ok()) Fail(st.ToString());
      MPI_Barrier(g.world());
      if (step + 1 == a.kill_after_step && g.world_rank() == 1 % g.world_size()) {
        std::raise(SIGKILL);
      }
    }
  }
  // Final parameters, for bitwise comparisons between runs.
  if (g.tp_rank() == 0 && g.cp_rank() == 0 && g.dp_rank() == 0 && log == nullptr &&
      !a.loss_log.empty()) {
    log = std::fopen(a.loss_log.c_str(), "a");
  }
  if (g.tp_rank() == 0 && g.cp_rank() == 0 && g.dp_rank() == 0 && log) {
    std::fprintf(log, "params_stage%d\t%016llx\n", g.pp_rank(),
                 static_cast<unsigned long long>(ParamHash(stage)));
  }
  if (log) std::fclose(log);
  return 0;
}

}  // namespace
}  // namespace gridfeed::toy

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  torch::set_num_threads(1);
  CLI::App app{"toy_trainer: a small transformer trained on gridfeed's micro-batches"};
  gridfeed::toy::Args a;
  gridfeed::config::OptionFlags flags(&app, gridfeed::config::Groups::All());
  app.add_option("--save", a.save_dir, "Checkpoint folder");
  app.add_option("--load", a.load_dir, "Resume from the latest checkpoint in this folder");
  app.add_option("--loss-log", a.loss_log,
                 "Append 'step<TAB>loss' lines (logging rank); a blend adds "
                 "'<TAB>NAME=loss<TAB>NAME_samples=n' per source");
  app.add_option("--testing-kill-after-step", a.kill_after_step)->group("");
  app.add_flag("--testing-check-documents", a.check_documents)->group("");
  app.add_option("--lr", a.lr);
  app.add_option("--layers", a.layers);
  app.add_option("--d-model", a.d_model);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = gridfeed::config::ExitOnParseError(app, e);
    MPI_Finalize();
    return rc;
  }
  int rc = 1;
  try {
    if (auto st = gridfeed::io::RemoveTempFilesOnSignal(); !st.ok()) {
      gridfeed::toy::Fail(st.ToString());
    }
    rc = gridfeed::toy::Run(a, flags);
  } catch (const std::exception& e) {
    gridfeed::toy::Fail(std::string("unexpected: ") + e.what());  // ends the job from here
  }
  MPI_Finalize();
  return rc;
}
