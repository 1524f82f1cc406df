#include "bench_report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "gridfeed/order/node_image.h"

namespace gridfeed::app {
namespace {

double Rate(int64_t n, double seconds) {
  return seconds > 0 ? static_cast<double>(n) / seconds : 0;
}

using Json = nlohmann::ordered_json;

Json OrNull(double v) { return v > 0 ? Json(v) : Json(nullptr); }

std::string Bytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  char s[32];
  if (b >= 1e9) {
    std::snprintf(s, sizeof(s), "%.2f GB", b / 1e9);
  } else if (b >= 1e6) {
    std::snprintf(s, sizeof(s), "%.1f MB", b / 1e6);
  } else if (b >= 1e3) {
    std::snprintf(s, sizeof(s), "%.1f kB", b / 1e3);
  } else {
    std::snprintf(s, sizeof(s), "%llu B", static_cast<unsigned long long>(bytes));
  }
  return s;
}

std::string SamplesPerSecond(double v) {
  char s[48];
  if (v >= 1e6) {
    std::snprintf(s, sizeof(s), "%.2f M samples/s", v / 1e6);
  } else if (v >= 1e3) {
    std::snprintf(s, sizeof(s), "%.1f K samples/s", v / 1e3);
  } else {
    std::snprintf(s, sizeof(s), "%.1f samples/s", v);
  }
  return s;
}

// "  label ........ value" rows under a heading.
void Row(std::string* out, const std::string& label, const std::string& value) {
  char s[512];
  std::snprintf(s, sizeof(s), "  %-24s %s\n", label.c_str(), value.c_str());
  *out += s;
}

std::string Seconds(double v) {
  char s[32];
  std::snprintf(s, sizeof(s), "%.3f s", v);
  return s;
}

}  // namespace

ProducerProjection ProjectProducers(const BuildFacts& b, int64_t nodes, double scale, double cores,
                                    double open_seconds) {
  ProducerProjection p;
  p.producers = nodes;
  p.scale = scale;
  const double threads = std::max(1, b.phases.threads);
  p.cores_per_node = cores > 0 ? cores : threads;
  // The largest producer's part: the stores divided as the run divides them (by index bytes).
  const std::vector<int> owner = order::PlanProducers(b.store_index_bytes, static_cast<int>(nodes));
  std::vector<double> load(static_cast<size_t>(nodes), 0);
  double total = 0;
  for (size_t s = 0; s < owner.size(); ++s) {
    load[static_cast<size_t>(owner[s])] += static_cast<double>(b.store_index_bytes[s]);
    total += static_cast<double>(b.store_index_bytes[s]);
  }
  const auto largest = std::max_element(load.begin(), load.end()) - load.begin();
  p.share = total > 0 ? load[static_cast<size_t>(largest)] / total : 1.0;
  // Its tables are built one store per thread: no more threads than it has stores.
  const double stores = std::max<double>(
      1, static_cast<double>(std::count(owner.begin(), owner.end(), static_cast<int>(largest))));
  // Bytes, scaled with the corpus: the tables T, the blend B (every producer builds it), the
  // positions L; a node holds L / N positions and world rank 0's also every position's source.
  const double T = static_cast<double>(b.table_bytes) * scale;
  const double B = static_cast<double>(b.phases.blend_bytes) * scale;
  const double L = static_cast<double>(b.split_length) * scale;
  const double per_sample = b.node_image_bytes_per_sample;
  const double window = static_cast<double>(b.node_image_fixed_bytes) +
                        per_sample * L / static_cast<double>(nodes) + 4.0 * L;
  // A node image's per-source part (what sections carry): less the blend's 20 bytes a sample.
  const double sections = std::max(0.0, per_sample - 20.0) * L * p.share;
  const double base = static_cast<double>(b.rss_before_bytes);
  // The producer's phases: its share built beside the blend, its sections cut (its tables
  // still held), exchanged, its node's image assembled, then written into the window.
  const double built = base + B + T * p.share + sections;
  const double exchanged = base + B + sections + window;
  const double written = base + 2.0 * window;
  p.node_window_bytes = static_cast<uint64_t>(window);
  p.producer_peak_bytes = static_cast<uint64_t>(std::max({built, exchanged, written}));
  if (nodes == 1) {  // one node holds the whole image, which takes the pages the tables free
    p.share = 1;
    p.node_window_bytes = static_cast<uint64_t>(static_cast<double>(b.image_bytes) * scale);
    p.producer_peak_bytes = static_cast<uint64_t>(base + T + B);
  }
  // Seconds: the tables' work (open + tables, wall x the cores it had) divided by the share on
  // the node's cores (at most one per store of the share), beside the blend on a core of its own
  // (with two cores or more, else one after the other on what there is); the bytes moved at the
  // measured image write's rate.
  const double work = (b.phases.open_seconds + b.phases.tables_seconds) * threads * scale;
  const double blend = b.phases.blend_seconds * scale;
  const double c = p.cores_per_node;
  p.build_seconds =
      c >= 2 ? std::max(work * p.share / std::min(c, stores), blend) : (work * p.share + blend) / c;
  const double rate =
      b.image_write_seconds > 0 ? static_cast<double>(b.image_bytes) / b.image_write_seconds : 1e9;
  // Cutting the sections takes each held sample of the producer's sources (L x share), the
  // assembly each of its node's (L / N), at the rate a node image was made in process; the
  // exchange and the window write move their bytes at the image write's rate.
  const double cut =
      b.node_image_seconds_per_sample * L * (p.share + 1.0 / static_cast<double>(nodes));
  p.sections_seconds = nodes == 1 ? static_cast<double>(p.node_window_bytes) / rate
                                  : (cut + (sections + 2.0 * window) / rate) / std::min(c, 1.0);
  p.open_seconds = open_seconds;
  p.seconds = p.build_seconds + p.sections_seconds + p.open_seconds;
  return p;
}

Result<ProjectionFacts> Project(const BenchReport& r, int64_t nodes, int64_t dp, double scale,
                                double cores) {
  if (!r.startup || r.startup->nodes < 2 || r.startup->readers <= 0) {
    return FailedPrecondition(
        "--project-nodes needs a broadcast between nodes measured in this run: run bench under "
        "mpirun on at least 2 nodes (or simulated ones: --testing-ranks-per-node)");
  }
  constexpr int64_t kMax = 1'000'000'000;  // keeps readers and bytes far from overflow
  if (nodes < 1 || dp < 1 || nodes > kMax || dp > kMax) {
    return InvalidArgument("--project-nodes and --project-dp must be in [1, 10^9], got " +
                           std::to_string(nodes) + " and " + std::to_string(dp));
  }
  const StartupFacts& t = *r.startup;
  const auto rounds = [](int64_t n) {  // ceil(log2 n): the rounds of a binomial tree
    int64_t k = 0;
    while ((int64_t{1} << k) < n) ++k;
    return k;
  };
  ProjectionFacts p;
  p.nodes = nodes;
  p.data_parallel_size = dp;
  p.readers = dp * (t.readers / r.data_parallel_size);
  p.readers_per_node = (p.readers + nodes - 1) / nodes;
  p.node_window_bytes = t.node_window_bytes;
  p.plain_copy_bytes_per_node = t.node_window_bytes * static_cast<uint64_t>(p.readers_per_node);
  p.build_seconds = t.build_seconds;
  p.broadcast_seconds = t.broadcast_seconds * static_cast<double>(rounds(nodes)) /
                        static_cast<double>(rounds(t.nodes));
  p.open_seconds = t.open_seconds;
  p.seconds = p.build_seconds + p.broadcast_seconds + p.open_seconds;
  if (!r.build.store_index_bytes.empty() && r.build.node_image_bytes_per_sample > 0) {
    p.producers = ProjectProducers(r.build, nodes, scale, cores, t.open_seconds);
  }
  return p;
}

std::string ReportText(const BenchReport& r) {
  std::string out;
  char s[512];
  std::snprintf(s, sizeof(s), "gridfeed bench: %s order, %s split, seq %lld, %d rank%s\n",
                r.pipeline.c_str(), r.split.c_str(), static_cast<long long>(r.seq_length), r.ranks,
                r.ranks == 1 ? "" : "s");
  out += s;
  const BuildFacts& b = r.build;
  out += "table build (world rank 0)\n";
  Row(&out, "build", Seconds(b.build_seconds));
  Row(&out, "image write", Seconds(b.image_write_seconds));
  Row(&out, "tables", Bytes(b.table_bytes));
  Row(&out, "image (broadcast)", Bytes(b.image_bytes));
  Row(&out, "peak RSS",
      Bytes(b.peak_rss_bytes) + " (" + Bytes(b.rss_before_bytes) + " before the build" +
          (b.peak_since_build ? "" : "; peak over the process's lifetime") + ")");
  const AssemblyFacts& a = r.assembly;
  std::snprintf(s, sizeof(s),
                "assembly, one reader (world rank 0, one thread): %lld consecutive positions of "
                "%lld\n",
                static_cast<long long>(a.samples), static_cast<long long>(a.split_length));
  out += s;
  const double read = Rate(a.samples, a.read_seconds), floor = Rate(a.samples, a.floor_seconds);
  Row(&out, "Read()", SamplesPerSecond(read) + " (" + Seconds(a.read_seconds) + ")");
  Row(&out, "memcpy + widen floor",
      SamplesPerSecond(floor) + " (" + Seconds(a.floor_seconds) + ", " +
          std::to_string(a.tokens_per_sample) + " tokens a sample)");
  std::snprintf(s, sizeof(s), "%.2fx", a.floor_seconds > 0 ? a.read_seconds / a.floor_seconds : 0);
  Row(&out, "Read() / floor", s);
  if (r.startup) {
    const StartupFacts& t = *r.startup;
    std::snprintf(s, sizeof(s), "start-up until every rank is ready (%d ranks)\n", r.ranks);
    out += s;
    Row(&out, "total", Seconds(t.seconds));
    Row(&out, "build + image write", Seconds(t.build_seconds));
    Row(&out, "broadcast (slowest rank)", Seconds(t.broadcast_seconds));
    Row(&out, "open (slowest rank)", Seconds(t.open_seconds));
    std::snprintf(s, sizeof(s), "rank 0 %.2f s, the other ranks %.2f s in all", t.cpu_rank0_seconds,
                  t.cpu_others_seconds);
    Row(&out, "CPU", s);
    Row(&out, "node windows",
        std::to_string(t.nodes) + ", the largest " + Bytes(t.node_window_bytes));
    Row(&out, "table producers",
        std::to_string(t.producers) + "; the largest peak RSS of any rank " +
            (t.max_peak_rss_bytes < 0 ? std::string("unknown")
                                      : Bytes(static_cast<uint64_t>(t.max_peak_rss_bytes))));
  }
  if (r.projection) {
    const ProjectionFacts& p = *r.projection;
    std::snprintf(s, sizeof(s),
                  "PROJECTION (not measured) onto %lld nodes at DP %lld, from this run's "
                  "start-up\n",
                  static_cast<long long>(p.nodes), static_cast<long long>(p.data_parallel_size));
    out += s;
    std::snprintf(s, sizeof(s), "%lld in all, %lld per node (D x this run's readers per DP rank)",
                  static_cast<long long>(p.readers), static_cast<long long>(p.readers_per_node));
    Row(&out, "readers", s);
    Row(&out, "node window", Bytes(p.node_window_bytes) + " (this run's largest, kept as it is)");
    Row(&out, "plain copy per reader",
        Bytes(p.plain_copy_bytes_per_node) + " per node (window x readers per node)");
    Row(&out, "build + image write",
        Seconds(p.build_seconds) + " (world rank 0 alone, as measured)");
    Row(&out, "broadcast",
        Seconds(p.broadcast_seconds) +
            " (measured x ceil(log2 nodes) / ceil(log2 measured nodes))");
    Row(&out, "open", Seconds(p.open_seconds) + " (as measured)");
    Row(&out, "total", Seconds(p.seconds));
  }
  if (r.projection && r.projection->producers) {
    const ProducerProjection& q = *r.projection->producers;
    std::snprintf(s, sizeof(s),
                  "PROJECTION (not measured) of %lld producers, one per node, %.3g x this corpus, "
                  "%.3g cores per node, from world rank 0's per-section costs\n",
                  static_cast<long long>(q.producers), q.scale, q.cores_per_node);
    out += s;
    std::snprintf(s, sizeof(s), "%.3f of the index bytes", q.share);
    Row(&out, "largest share", s);
    Row(&out, "node window", Bytes(q.node_window_bytes) + " (world rank 0's node, the largest)");
    Row(&out, "producer peak RSS", Bytes(q.producer_peak_bytes));
    Row(&out, "build (share + blend)", Seconds(q.build_seconds));
    Row(&out, "sections to window", Seconds(q.sections_seconds));
    Row(&out, "open", Seconds(q.open_seconds) + " (as measured)");
    Row(&out, "total", Seconds(q.seconds));
  }
  return out;
}

namespace {
std::string Hex(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof(s), "%016llx", static_cast<unsigned long long>(v));
  return s;
}
}  // namespace

std::string ReportJson(const BenchReport& r) {
  const BuildFacts& b = r.build;
  const AssemblyFacts& a = r.assembly;
  Json j = {
      {"pipeline", r.pipeline},
      {"split", r.split},
      {"seq_length", r.seq_length},
      {"ranks", r.ranks},
      {"build",
       {{"build_seconds", b.build_seconds},
        {"image_write_seconds", b.image_write_seconds},
        {"table_bytes", b.table_bytes},
        {"image_bytes", b.image_bytes},
        {"rss_before_bytes", b.rss_before_bytes},
        {"peak_rss_bytes", b.peak_rss_bytes},
        {"peak_since_build", b.peak_since_build},
        {"producers", r.startup ? r.startup->producers : 1},
        {"max_producer_peak_bytes",
         r.startup ? r.startup->max_peak_rss_bytes : static_cast<int64_t>(b.peak_rss_bytes)},
        {"image_digest",
         Hex(r.startup && r.startup->image_digest != 0 ? r.startup->image_digest : b.image_digest)},
        {"sections",
         {{"open_seconds", b.phases.open_seconds},
          {"tables_seconds", b.phases.tables_seconds},
          {"blend_seconds", b.phases.blend_seconds},
          {"blend_bytes", b.phases.blend_bytes},
          {"threads", b.phases.threads},
          {"store_index_bytes", b.store_index_bytes},
          {"node_image_fixed_bytes", b.node_image_fixed_bytes},
          {"node_image_bytes_per_sample", b.node_image_bytes_per_sample},
          {"node_image_seconds_per_sample", b.node_image_seconds_per_sample},
          {"split_length", b.split_length}}}}},
      {"assembly",
       {{"samples", a.samples},
        {"split_length", a.split_length},
        {"tokens_per_sample", a.tokens_per_sample},
        {"read_seconds", a.read_seconds},
        {"read_samples_per_second", OrNull(Rate(a.samples, a.read_seconds))},
        {"floor_seconds", a.floor_seconds},
        {"floor_samples_per_second", OrNull(Rate(a.samples, a.floor_seconds))},
        {"read_over_floor", OrNull(a.floor_seconds > 0 ? a.read_seconds / a.floor_seconds : 0)}}},
      {"startup", nullptr},
      {"projection", nullptr}};
  if (r.startup) {
    const StartupFacts& t = *r.startup;
    j["startup"] = {{"seconds", t.seconds},
                    {"build_seconds", t.build_seconds},
                    {"broadcast_seconds", t.broadcast_seconds},
                    {"open_seconds", t.open_seconds},
                    {"cpu_rank0_seconds", t.cpu_rank0_seconds},
                    {"cpu_others_seconds", t.cpu_others_seconds},
                    {"nodes", t.nodes},
                    {"node_window_bytes", t.node_window_bytes},
                    {"readers", t.readers}};
  }
  if (r.projection) {
    const ProjectionFacts& p = *r.projection;
    j["projection"] = {
        {"nodes", p.nodes},
        {"data_parallel_size", p.data_parallel_size},
        {"readers", p.readers},
        {"readers_per_node", p.readers_per_node},
        {"node_window_bytes", p.node_window_bytes},
        {"plain_copy_bytes_per_node", p.plain_copy_bytes_per_node},
        {"build_seconds", p.build_seconds},
        {"broadcast_seconds", p.broadcast_seconds},
        {"open_seconds", p.open_seconds},
        {"seconds", p.seconds},
        {"formula",
         "readers = D * startup.readers / DP; readers_per_node = ceil(readers / N); "
         "node_window_bytes = startup.node_window_bytes; plain_copy_bytes_per_node = "
         "node_window_bytes * readers_per_node; build = startup.build_seconds; broadcast = "
         "startup.broadcast_seconds * ceil(log2 N) / ceil(log2 startup.nodes); open = "
         "startup.open_seconds; seconds = build + broadcast + open"},
        {"producers", nullptr}};
    if (p.producers) {
      const ProducerProjection& q = *p.producers;
      j["projection"]["producers"] = {
          {"producers", q.producers},
          {"scale", q.scale},
          {"cores_per_node", q.cores_per_node},
          {"share", q.share},
          {"node_window_bytes", q.node_window_bytes},
          {"producer_peak_bytes", q.producer_peak_bytes},
          {"build_seconds", q.build_seconds},
          {"sections_seconds", q.sections_seconds},
          {"open_seconds", q.open_seconds},
          {"seconds", q.seconds},
          {"formula",
           "share = the largest producer's part of the index bytes (stores divided as the run "
           "divides them); T, B, L = table bytes, blend bytes, positions, times scale; window = "
           "fixed + per_sample * L / N + 4 L; sections = (per_sample - 20) * L * share; peak = "
           "base + max(B + T share + sections, B + sections + window, 2 window); work = (open + "
           "tables) * threads * scale; build = cores >= 2 ? max(work share / min(cores, "
           "stores of the share), blend) : (work share + blend) / cores; sections_seconds = "
           "(node image seconds per sample * L * (share + 1 / N) + (sections + 2 window) / "
           "image write rate) / min(cores, 1); seconds = build + sections_seconds + "
           "startup.open_seconds"}};
    }
  }
  return j.dump();
}

}  // namespace gridfeed::app
