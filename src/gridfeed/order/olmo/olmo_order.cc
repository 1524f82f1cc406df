#include "gridfeed/order/olmo/olmo_order.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <tuple>

namespace gridfeed::order {

Result<OlmoSizes> OlmoSizesFor(int64_t dataset_len, int64_t world_size, int64_t global_batch_size,
                               bool drop_last) {
  if (world_size < 1) return InvalidArgument("world size must be >= 1");
  if (dataset_len < 0) return InvalidArgument("dataset length must be >= 0");
  // OLMo asserts this: the order is uint32 and N itself must stay representable.
  if (dataset_len >= int64_t{0xffffffff}) {
    return InvalidArgument("OLMo's dataset length must be below 2^32 - 1, got " +
                           std::to_string(dataset_len));
  }
  if (global_batch_size < 1 || global_batch_size % world_size != 0) {
    return InvalidArgument("global batch size " + std::to_string(global_batch_size) +
                           " is not a positive multiple of the world size " +
                           std::to_string(world_size));
  }
  OlmoSizes s;
  // OLMo's ceil((N - W) / W) in floating point equals floor(N / W) here.
  s.num_samples = (drop_last && dataset_len % world_size != 0)
                      ? dataset_len / world_size
                      : (dataset_len + world_size - 1) / world_size;
  s.total_size = s.num_samples * world_size;
  s.device_batch_size = global_batch_size / world_size;
  return s;
}

Status OlmoCheckOrderNotEmpty(int64_t dataset_len, int64_t world_size, const OlmoSizes& sizes) {
  if (sizes.total_size > 0) return Status::Ok();
  return FailedPrecondition("OLMo's global order is empty (" + std::to_string(dataset_len) +
                            " instances, world size " + std::to_string(world_size) +
                            (dataset_len > 0 ? ", drop_last" : "") +
                            "): nothing to feed; OLMo itself fails here writing global_indices.npy "
                            "(cannot mmap an empty file)");
}

void OlmoGlobalIndicesInto(int64_t dataset_len, const SeedWords& seed_plus_epoch, bool shuffle,
                           std::span<uint32_t> out) {
  const size_t n = static_cast<size_t>(dataset_len);
  const size_t total = out.size();
  if (n == 0 || total == 0) return;
  // arange(N) lives in out[0, min(N, total)) plus, when truncating, a small tail (< W entries).
  const size_t head = std::min(n, total);
  std::vector<uint32_t> tail(n - head);
  std::iota(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(head), uint32_t{0});
  std::iota(tail.begin(), tail.end(), static_cast<uint32_t>(head));
  if (shuffle) {
    Pcg64 rng(seed_plus_epoch);
    ShuffleUint32(rng, out.first(head), tail);
  }
  // Padding repeats the shuffled head: out[k] = out[k - N] for k >= N.
  for (size_t k = n; k < total; ++k) out[k] = out[k - n];
}

std::vector<uint32_t> OlmoGlobalIndices(int64_t dataset_len, const SeedWords& seed_plus_epoch,
                                        bool shuffle, const OlmoSizes& sizes) {
  std::vector<uint32_t> out(static_cast<size_t>(sizes.total_size));
  OlmoGlobalIndicesInto(dataset_len, seed_plus_epoch, shuffle, out);
  return out;
}

std::vector<int64_t> OlmoRankStream(std::span<const uint32_t> global, int64_t rank,
                                    int64_t world_size, int64_t start_index, int64_t max_examples) {
  int64_t end = static_cast<int64_t>(global.size());
  if (max_examples >= 0) end = std::min(end, max_examples);
  const int64_t begin = std::min(end, std::max<int64_t>(start_index, 0));
  std::vector<int64_t> out;
  if (world_size < 1 || rank < 0) return out;
  out.reserve(static_cast<size_t>((end - begin) / world_size + 1));
  for (int64_t k = begin + rank; k < end; k += world_size) out.push_back(global[k]);
  return out;
}

std::vector<int64_t> OlmoWorkerStream(std::span<const int64_t> rank_stream,
                                      int64_t device_batch_size, int64_t worker,
                                      int64_t num_workers) {
  const int64_t len = static_cast<int64_t>(rank_stream.size());
  const int64_t b = device_batch_size;
  const int64_t rows = len / b;
  std::vector<int64_t> out;
  for (int64_t r = worker; r < rows; r += num_workers) {
    out.insert(out.end(), rank_stream.begin() + r * b, rank_stream.begin() + (r + 1) * b);
  }
  for (int64_t i = rows * b + worker; i < len; i += num_workers) out.push_back(rank_stream[i]);
  return out;
}

std::vector<OlmoLoaderBatch> OlmoLoaderBatches(std::span<const int64_t> rank_stream,
                                               int64_t device_batch_size, int64_t num_workers,
                                               bool drop_last) {
  const int64_t b = device_batch_size;
  // (position in its worker's stream, worker, batch): torch collects round-robin and skips
  // exhausted workers, which is this order.
  std::vector<std::tuple<int64_t, int64_t, OlmoLoaderBatch>> keyed;
  const int64_t workers = std::max<int64_t>(num_workers, 1);
  for (int64_t w = 0; w < workers; ++w) {
    const std::vector<int64_t> s =
        num_workers == 0 ? std::vector<int64_t>(rank_stream.begin(), rank_stream.end())
                         : OlmoWorkerStream(rank_stream, b, w, num_workers);
    const int64_t len = static_cast<int64_t>(s.size());
    for (int64_t j = 0; j * b < len; ++j) {
      const int64_t end = std::min(len, (j + 1) * b);
      if (drop_last && end - j * b < b) break;
      OlmoLoaderBatch batch;
      batch.worker = num_workers == 0 ? -1 : w;
      batch.index.assign(s.begin() + j * b, s.begin() + end);
      keyed.emplace_back(j, w, std::move(batch));
    }
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& x, const auto& y) {
    return std::tie(std::get<0>(x), std::get<1>(x)) < std::tie(std::get<0>(y), std::get<1>(y));
  });
  std::vector<OlmoLoaderBatch> out;
  out.reserve(keyed.size());
  for (auto& k : keyed) out.push_back(std::move(std::get<2>(k)));
  return out;
}

std::vector<int64_t> OlmoLoaderTail(int64_t stream_len, int64_t device_batch_size,
                                    int64_t num_workers, bool drop_last) {
  std::vector<int64_t> out;
  const int64_t b = device_batch_size;
  const int64_t rows = stream_len / b;
  const int64_t full = rows * b;
  if (drop_last || full == stream_len) return out;
  if (num_workers == 0) {
    for (int64_t i = full; i < stream_len; ++i) out.push_back(i);
    return out;
  }
  // Worker w holds ceil((rows - w) / K) full rows and then its leftovers as one partial batch
  // (fewer than B entries); the batches come out by (position in the worker's stream, worker).
  std::vector<std::pair<int64_t, int64_t>> order;  // (batch position, worker)
  for (int64_t w = 0; w < num_workers && full + w < stream_len; ++w) {
    const int64_t own_rows = w < rows ? (rows - w + num_workers - 1) / num_workers : 0;
    order.emplace_back(own_rows, w);
  }
  std::sort(order.begin(), order.end());
  for (const auto& [pos, w] : order) {
    for (int64_t i = full + w; i < stream_len; i += num_workers) out.push_back(i);
  }
  return out;
}

}  // namespace gridfeed::order
