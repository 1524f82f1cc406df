#include "gridfeed/order/dataset_builder.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <limits>
#include <set>
#include <thread>

#include "gridfeed/core/memory_usage.h"
#include "gridfeed/core/stopwatch.h"
#include "gridfeed/core/usable_cpus.h"
#include "gridfeed/order/sample.h"

namespace gridfeed::order {
namespace {

struct Job {
  int split;
  size_t mid;
};

}  // namespace

Status BuildMidTables(std::array<std::optional<SplitDataset>, 3>& splits, const DatasetConfig& c,
                      const std::function<void()>& drawer_idle) {
  if (c.on_table_final && !c.on_mid_built) {
    return Internal("DatasetConfig::on_table_final without on_mid_built, where its writes end");
  }
  std::vector<Job> jobs;
  for (int i = 0; i < 3; ++i) {
    if (!splits[i]) continue;
    for (size_t k = 0; k < splits[i]->mids.size(); ++k) {
      if (splits[i]->mids[k].dataset) jobs.push_back({i, k});  // another producer's otherwise
    }
  }
  std::vector<Status> statuses(jobs.size());
  std::atomic<size_t> next{0};
  // After a failure no job starts: every job taken later comes later in the serial order, so
  // the first error in that order is still among those built.
  std::atomic<bool> failed{false};
  auto worker = [&] {
    for (size_t j; !failed && (j = next.fetch_add(1)) < jobs.size();) {
      MidDataset& m = splits[jobs[j].split]->mids[jobs[j].mid];
      GptTablesConfig g;
      g.seq_length = m.seq_length > 0 ? m.seq_length : c.seq_length;
      g.seed = c.seed;
      g.add_extra_token = c.add_extra_token;
      g.drop_last = !(m.split == Split::kValid && !c.drop_last_partial_validation_sequence);
      g.num_samples = m.num_samples_requested;
      // The build copies the lengths; their mapped pages need not stay resident.
      g.lengths_read = [ds = m.dataset.get(), begin = m.begin, end = m.end] {
        const auto bytes = ds->sequence_lengths().bytes();
        ds->DropIndexPages(
            bytes.subspan(static_cast<size_t>(begin) * 4, static_cast<size_t>(end - begin) * 4));
      };
      g.drawer_idle = drawer_idle;
      if (c.on_table_final) {
        // Called where nothing may throw (the drawing thread): a table whose write did not
        // start is written by on_mid_built.
        g.table_final = [&c, split = jobs[j].split, k = jobs[j].mid](
                            GptTable table, const GptTables& t, bool read_after) noexcept {
          try {
            c.on_table_final(split, k, table, t, read_after);
          } catch (const std::exception&) {
          }
        };
      }
      g.copy_lengths = [ds = m.dataset.get()](int64_t begin, int64_t end, int32_t* out) {
        return ds->CopySequenceLengths(begin, end, out);
      };
      g.max_tokens = static_cast<int64_t>(
          std::min<uint64_t>(m.dataset->num_tokens(), std::numeric_limits<int64_t>::max()));
      Result<GptTables> t = Internal("not built");
      try {
        t = BuildGptTables(m.dataset->sequence_lengths(), m.begin, m.end, g, &m.times);
      } catch (const std::exception& e) {  // e.g. bad_alloc: an error, not std::terminate
        t = FailedPrecondition(std::string("building its tables failed: ") + e.what());
      }
      if (!t.ok()) {
        statuses[j] = t.status().WithContext("dataset '" + m.prefix + "' split " +
                                             kSplitNames[static_cast<int>(m.split)]);
        failed = true;
        continue;
      }
      m.tables = std::move(t).value();
      if (c.on_mid_built) {
        Status st;
        try {
          st = c.on_mid_built(jobs[j].split, jobs[j].mid, m);
        } catch (const std::exception& e) {  // e.g. bad_alloc: an error, not std::terminate
          st = Internal(std::string("handing its tables on failed: ") + e.what());
        }
        if (!st.ok()) {
          statuses[j] = st.WithContext("the tables of dataset '" + m.prefix + "' split " +
                                       kSplitNames[static_cast<int>(m.split)]);
          failed = true;
        }
      }
    }
  };
  const size_t n_threads = std::min<size_t>(jobs.size(), c.threads > 0 ? c.threads : UsableCpus());
  {
    std::vector<std::jthread> pool;
    for (size_t i = 1; i < n_threads; ++i) pool.emplace_back(worker);
    worker();
  }
  for (auto& s : statuses) GRIDFEED_RETURN_IF_ERROR(s);
  return Status::Ok();
}

namespace {

// The store holds the counts --per-dataset-sequences-path gives for it (Megatron would trust
// them and read the index at those sizes).
Status CheckSequenceCounts(const DatasetConfig& c, const std::string& prefix,
                           const io::IndexedDataset& ds) {
  const std::string where = "--per-dataset-sequences-path '" + c.sequences_path + "'";
  const auto it = c.sequences_per_dataset->find(prefix);
  if (it == c.sequences_per_dataset->end()) {
    return InvalidArgument(where + " has no entry for dataset '" + prefix +
                           "' (write it with gridfeed inspect --per-dataset-sequences-out)");
  }
  const int64_t sequences = ds.num_sequences(), documents = ds.num_documents() + 1;
  if (it->second[0] != sequences || it->second[1] != documents) {
    return InvalidArgument(where + " gives dataset '" + prefix + "' [sequence count, document " +
                           "count] [" + std::to_string(it->second[0]) + ", " +
                           std::to_string(it->second[1]) + "], but '" + prefix + ".idx' holds [" +
                           std::to_string(sequences) + ", " + std::to_string(documents) + "]");
  }
  return Status::Ok();
}

MidDataset MakeMid(const std::string& prefix, Split split, std::pair<double, double> bookend,
                   std::optional<int64_t> num_samples,
                   std::map<std::string, std::shared_ptr<const io::IndexedDataset>>& open) {
  MidDataset m;
  m.prefix = prefix;
  m.split = split;
  m.num_samples_requested = num_samples;
  const auto it = open.find(prefix);
  if (it == open.end()) return m;  // another producer's store (DatasetConfig::builds_store)
  m.dataset = it->second;
  std::tie(m.begin, m.end) = BookendToRange(bookend, m.dataset->num_sequences());
  return m;
}

// Where the digests asked for are computed: on a core of their own beside the tables where one
// is free (the build keeps two busy), else from the index checks' own reads (one pass over
// each index instead of two; on two cores a thread beside the tables slowed them as much).
bool DigestsInChecks(const DatasetConfig& c) { return c.digest_indexes && UsableCpus() <= 2; }

// Whether the stores' full index checks run on a thread beside the tables, which need only
// the lengths: one store (its check is one sequential pass) and a core besides the build's.
// On two cores they wait for the build's drawing thread to do its own work, and then take
// its core while it waits on the applier (146.5M documents: the open's 1.1-1.3 s of checking
// left the critical path). Many stores are opened and checked
// in parallel before the build, as their builds then keep every core busy.
bool ChecksBesideTables(size_t stores) { return stores == 1 && UsableCpus() >= 2; }

// Opens every prefix of `prefixes` once (in order, duplicates skipped) on up to `threads`
// threads into `open`; the first failure in prefix order is the error (the same one a serial
// open reports). With `structure_only`, opens with the structure check only (the caller runs
// CheckIndexFully later); a store failing it is opened again with the full check, so the
// error is the one a full open reports.
Status OpenStores(const std::vector<std::string>& prefixes, const DatasetConfig& c,
                  std::map<std::string, std::shared_ptr<const io::IndexedDataset>>& open,
                  bool structure_only = false) {
  std::vector<std::string> todo;
  for (const auto& p : prefixes) {
    if (open.count(p) == 0 && std::find(todo.begin(), todo.end(), p) == todo.end()) {
      todo.push_back(p);
    }
  }
  std::vector<std::optional<Result<io::IndexedDataset>>> opened(todo.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < todo.size();) {
      try {
        if (structure_only) {
          opened[i].emplace(io::IndexedDataset::Open(todo[i], false, io::IndexCheck::kStructure));
          if (opened[i]->ok()) continue;
        }
        opened[i].emplace(
            io::IndexedDataset::Open(todo[i], false, io::IndexCheck::kFull, DigestsInChecks(c)));
      } catch (const std::exception& e) {  // e.g. bad_alloc: an error, not std::terminate
        opened[i].emplace(Internal("opening '" + todo[i] + "': " + e.what()));
      }
    }
  };
  {
    // Opening is mostly reading and checking the index: a few threads overlap it well.
    const size_t n =
        std::min<size_t>(todo.size(), c.threads > 0 ? c.threads : std::min(8u, UsableCpus()));
    std::vector<std::jthread> pool;
    for (size_t t = 1; t < n; ++t) pool.emplace_back(worker);
    worker();
  }
  for (size_t i = 0; i < todo.size(); ++i) {
    GRIDFEED_RETURN_IF_ERROR(opened[i]->status());
    if (c.sequences_per_dataset) {
      if (Status counts = CheckSequenceCounts(c, todo[i], **opened[i]); !counts.ok()) {
        // A corruption the full check finds is the error a full open would have reported.
        if (structure_only) {
          GRIDFEED_RETURN_IF_ERROR(
              io::IndexedDataset::Open(todo[i], false, io::IndexCheck::kFull).status());
        }
        return counts;
      }
    }
    open[todo[i]] = std::make_shared<const io::IndexedDataset>(std::move(**opened[i]));
  }
  return Status::Ok();
}

// A weighted blend's table depends on its weights and size only, so it is built on a thread of
// its own while the stores are opened and the mid-level tables built.
struct PendingBlend {
  std::vector<double> weights;     // NormalizedBlendWeights' result
  std::vector<double> normalized;  // Normalize(weights): the BlendedDataset's weights
  int64_t size = 0;
  BlendTables tables;
  double seconds = 0;
  std::exception_ptr failed;  // rethrown on the calling thread after the join
  std::jthread thread;        // asks to stop and joins on destruction (every return path)
};

}  // namespace

Result<BuiltDatasets> BuildDatasets(const DatasetConfig& c) {
  BuiltDatasets out;
  if (c.seq_length <= 0) return InvalidArgument("--seq-length must be positive");
  const bool per_split =
      c.split_paths[0].has_value() || c.split_paths[1].has_value() || c.split_paths[2].has_value();
  if (per_split && c.data_path) {
    return InvalidArgument("give --data-path or --train/valid/test-data-path, not both");
  }
  if (!per_split && !c.data_path) {
    return InvalidArgument("no data: give --data-path or --train/valid/test-data-path");
  }
  // Pad id: the NullTokenizer's pad collides with its EOD -> -1 (Megatron warns too).
  out.pad_id_used = PadIdUsed(c.pad_id, c.eod_id);
  if (c.pad_id == c.eod_id) {
    out.warnings.push_back("pad id " + std::to_string(c.pad_id) +
                           " equals the EOD id; using pad id -1 like Megatron");
  }

  // Parse every blend.
  std::array<std::optional<Blend>, 3> blends;
  std::optional<Blend> blend;
  if (per_split) {
    for (int i = 0; i < 3; ++i) {
      if (!c.split_paths[i]) continue;
      GRIDFEED_ASSIGN_OR_RETURN(blends[i], ParseDataPath(*c.split_paths[i]));
    }
  } else {
    GRIDFEED_ASSIGN_OR_RETURN(blend, ParseDataPath(*c.data_path));
    GRIDFEED_ASSIGN_OR_RETURN(out.split_matrix, SplitMatrixOf(c.split.value_or(""), &out.warnings));
  }
  auto blend_of = [&](int i) -> const Blend* {
    return per_split ? (blends[i] ? &*blends[i] : nullptr) : &*blend;
  };
  auto bookend_of = [&](int i) {
    return per_split ? Bookend(std::make_pair(0.0, 1.0)) : out.split_matrix[i];
  };
  auto single = [&](const Blend& b) { return b.prefixes.size() == 1 && (per_split || !b.weights); };
  if (c.builds_store) {
    for (int i = 0; i < 3; ++i) {
      const Blend* b = blend_of(i);
      if (b == nullptr || !bookend_of(i) || (!single(*b) && b->weights)) continue;
      return InvalidArgument(std::string("split ") + kSplitNames[i] +
                             ": tables built by several producers need a weighted blend");
    }
  }

  // Weighted blends start now (stopped and joined on every error return below).
  std::array<std::unique_ptr<PendingBlend>, 3> pending;
  for (int i = 0; i < 3; ++i) {
    const Blend* b = blend_of(i);
    if (b == nullptr || !bookend_of(i) || single(*b) || !b->weights) continue;
    if (!c.sizes[i]) {
      return InvalidArgument(std::string("split ") + kSplitNames[i] +
                             ": a weighted blend needs a sample count (got none)");
    }
    auto p = std::make_unique<PendingBlend>();
    GRIDFEED_ASSIGN_OR_RETURN(p->weights, NormalizedBlendWeights(*b->weights));
    p->normalized = Normalize(p->weights);
    for (double w : p->weights) {
      p->size += static_cast<int64_t>(std::ceil(static_cast<double>(*c.sizes[i]) * w));
    }
    GRIDFEED_RETURN_IF_ERROR(
        CheckMemoryFor(static_cast<double>(p->size) * (sizeof(int32_t) + sizeof(int64_t)),
                       std::string("split ") + kSplitNames[i] + ": the blend table of " +
                           std::to_string(p->size) + " positions",
                       "; ask for fewer samples (--" + std::string(kSplitNames[i]) + "-samples)"));
    // An error return below destroys the jthread, which asks the build to stop, then joins.
    p->thread = std::jthread([q = p.get()](std::stop_token stop) {
      Stopwatch watch;
      try {
        q->tables = BuildBlendingIndices(q->normalized, q->size, stop);
      } catch (...) {
        q->failed = std::current_exception();
      }
      q->seconds = watch.Seconds();
    });
    pending[i] = std::move(p);
  }

  // Open every token store once (of this producer's share).
  std::vector<std::string> prefixes;  // every split's, in split order (OpenStores dedups)
  for (int i = 0; i < 3; ++i) {
    if (const Blend* b = blend_of(i); b != nullptr && (per_split || i == 0)) {
      for (const auto& p : b->prefixes) {
        if (!c.builds_store || c.builds_store(p)) prefixes.push_back(p);
      }
    }
  }
  const bool checks_beside =
      ChecksBesideTables(std::set<std::string>(prefixes.begin(), prefixes.end()).size());
  std::map<std::string, std::shared_ptr<const io::IndexedDataset>> open;
  Stopwatch t0;
  GRIDFEED_RETURN_IF_ERROR(OpenStores(prefixes, c, open, checks_beside));
  out.seconds_open = t0.Seconds();
  // With checks_beside, the full checks (and the digests asked for, from the same reads) run
  // beside the tables; their first failure is the build's error, whatever the build did with
  // lengths not yet checked. Joined on every return below; declared after `open`.
  // On two cores the checks start once the build's drawing thread has done its own work (it
  // then mostly waits on the applier): started at once they took a third of both cores from
  // the lengths' read and the pairs. With more cores they start at once, on a core of their
  // own. `start` is set on every path before the checker is joined.
  Status checks;
  std::atomic<bool> start{false};
  auto let_start = [&start] {
    start.store(true, std::memory_order_release);
    start.notify_all();
  };
  std::jthread checker;
  if (checks_beside) {
    std::vector<std::shared_ptr<const io::IndexedDataset>> stores;
    for (const auto& [prefix, ds] : open) stores.push_back(ds);
    checker = std::jthread(
        [&checks, &out, &start, stores = std::move(stores), digest = c.digest_indexes] {
          start.wait(false, std::memory_order_acquire);
          Stopwatch watch;
          for (const auto& ds : stores) {
            try {
              checks = ds->CheckIndexFully(digest);
            } catch (const std::exception& e) {  // e.g. bad_alloc: an error, not std::terminate
              checks = Internal("checking '" + ds->prefix() + ".idx': " + e.what());
            }
            if (!checks.ok()) break;
          }
          out.seconds_checks_beside = watch.Seconds();
        });
  }
  if (UsableCpus() > 2) let_start();
  // Destroyed before `checker` (declared after it): no return path leaves it waiting.
  struct StartOnExit {
    decltype(let_start)& let;
    ~StartOnExit() { let(); }
  } start_on_exit{let_start};
  std::jthread digests;  // joined on every return below
  if (c.digest_indexes && !DigestsInChecks(c) && !checks_beside) {
    std::vector<std::shared_ptr<const io::IndexedDataset>> stores;
    for (const auto& [prefix, ds] : open) stores.push_back(ds);
    digests = std::jthread([stores = std::move(stores)] {
      try {
        for (const auto& ds : stores) ds->index_xxh3();
      } catch (...) {
        // Not remembered: the caller's own index_xxh3() computes it again and sees the error.
      }
    });
  }

  // Lay out the datasets of each split (tables are built afterwards, in parallel).
  for (int i = 0; i < 3; ++i) {
    const Split split = static_cast<Split>(i);
    const Blend* b = blend_of(i);
    if (b == nullptr) continue;
    Bookend bookend = bookend_of(i);
    if (!bookend) continue;
    SplitDataset sd;
    if (single(*b)) {
      sd.mids.push_back(MakeMid(b->prefixes[0], split, *bookend, c.sizes[i], open));
    } else if (b->weights) {
      const std::vector<double>& w = pending[i]->weights;
      auto per_dataset = SizePerSplitPerDataset(w, c.sizes, c.mid_level_dataset_surplus);
      sd.blended = true;
      sd.weights = pending[i]->normalized;
      for (size_t k = 0; k < w.size(); ++k) {
        sd.mids.push_back(MakeMid(b->prefixes[k], split, *bookend, per_dataset[k][i], open));
      }
      sd.size = pending[i]->size;
    } else {
      sd.blended = true;
      for (const auto& p : b->prefixes)
        sd.mids.push_back(MakeMid(p, split, *bookend, std::nullopt, open));
      sd.size = c.sizes[i];  // completed once the mid lengths are known
    }
    out.splits[i] = std::move(sd);
  }

  t0 = Stopwatch();
  const Status built = BuildMidTables(out.splits, c, let_start);
  let_start();  // a build without a drawing thread: the checks run now
  if (checker.joinable()) checker.join();
  GRIDFEED_RETURN_IF_ERROR(checks);
  GRIDFEED_RETURN_IF_ERROR(built);
  out.seconds_tables = t0.Seconds();
  // The lengths were read; keep a multi-GB index from staying counted in resident memory.
  for (const auto& [prefix, ds] : open) ds->DropIndexPages(ds->index_bytes());

  t0 = Stopwatch();
  for (int i = 0; i < 3; ++i) {
    if (!out.splits[i]) continue;
    SplitDataset& sd = *out.splits[i];
    if (!sd.blended) {
      sd.length = sd.mids[0].tables.num_samples();
      continue;
    }
    const bool weighted = !sd.weights.empty();
    if (!weighted) {
      std::vector<double> lengths;
      std::vector<int64_t> sizes;
      int64_t total = 0;
      for (const auto& m : sd.mids) {
        lengths.push_back(static_cast<double>(m.tables.num_samples()));
        sizes.push_back(m.tables.num_samples());
        total += m.tables.num_samples();
      }
      // Like Megatron's BlendedDataset: normalised for a target size, raw for exhaustive.
      sd.weights = sd.size ? Normalize(lengths) : lengths;
      if (sd.size) {
        sd.size = std::min(*sd.size, total);
        sd.blend = BuildBlendingIndices(sd.weights, *sd.size);
      } else {
        sd.blend = BuildExhaustiveBlendingIndices(sizes);
      }
    } else {
      pending[i]->thread.join();
      if (pending[i]->failed) std::rethrow_exception(pending[i]->failed);
      sd.blend = std::move(pending[i]->tables);
      out.seconds_blend_build += pending[i]->seconds;
    }
    sd.length = static_cast<int64_t>(sd.blend.dataset_index.size());
    // Every source must have the samples the blend asks of it (Megatron fails mid-run).
    std::vector<int64_t> needed(sd.mids.size(), 0);
    for (int64_t p = 0; p < sd.length; ++p) {
      auto k = static_cast<size_t>(sd.blend.dataset_index[p]);
      needed[k] = std::max(needed[k], sd.blend.dataset_sample_index[p] + 1);
    }
    for (size_t k = 0; k < sd.mids.size(); ++k) {
      const int64_t have = sd.mids[k].tables.num_samples();
      if (!sd.mids[k].dataset) continue;  // another producer's, checked there
      if (needed[k] > have) {
        return FailedPrecondition(
            std::string("split ") + kSplitNames[i] + ": blend source " + std::to_string(k) + " ('" +
            sd.mids[k].prefix + "') has " + std::to_string(have) + " samples but the blend needs " +
            std::to_string(needed[k]) + " (short by " + std::to_string(needed[k] - have) +
            "); raise --mid-level-dataset-surplus");
      }
    }
  }
  out.seconds_blend = t0.Seconds();
  return out;
}

}  // namespace gridfeed::order
