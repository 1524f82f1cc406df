// OLMo's global-order shuffle: gridfeed's ShuffleUint32 against numpy's
// Generator(PCG64(seed)).shuffle(np.arange(N, dtype=np.uint32)) run in the same invocation
// (Debian's /usr/bin/python3 with numpy). Both permutations must hash the same (SHA-256 of
// the little-endian bytes); the program prints both times and their ratio, never asserts on
// time. Exit status 1 when the permutations differ or numpy cannot be run.
//   pcg64_shuffle_bench [--n N] [--seed S] [--python PATH]   (defaults 1e8, 6198)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "gridfeed/order/olmo/pcg64.h"
#include "testing/sha256.h"

namespace {

using Clock = std::chrono::steady_clock;

// numpy's side: prints "<seconds of the shuffle alone> <sha256 of the result>".
constexpr const char* kNumpyScript =
    "import sys, time, hashlib, numpy as np\n"
    "n, seed = int(sys.argv[1]), int(sys.argv[2])\n"
    "a = np.arange(n, dtype=np.uint32)\n"
    "g = np.random.Generator(np.random.PCG64(seed))\n"
    "t = time.perf_counter(); g.shuffle(a); t = time.perf_counter() - t\n"
    "print(t, hashlib.sha256(memoryview(a)).hexdigest())\n";

bool RunNumpy(const std::string& python, int64_t n, const std::string& seed, double* seconds,
              std::string* sha) {
  char script_path[] = "/tmp/gridfeed_pcg64_shuffle_bench_XXXXXX";
  const int fd = mkstemp(script_path);
  if (fd < 0) return false;
  const bool written = write(fd, kNumpyScript, std::strlen(kNumpyScript)) ==
                       static_cast<ssize_t>(std::strlen(kNumpyScript));
  close(fd);
  if (!written) return false;
  const std::string cmd =
      python + " " + std::string(script_path) + " " + std::to_string(n) + " " + seed + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return false;
  char line[512] = {0};
  const bool got = std::fgets(line, sizeof line, p) != nullptr;
  const int rc = pclose(p);
  unlink(script_path);
  char hex[128] = {0};
  if (!got || rc != 0 || std::sscanf(line, "%lf %127s", seconds, hex) != 2) {
    std::fprintf(stderr, "numpy run failed (%s): %s\n", cmd.c_str(), line);
    return false;
  }
  *sha = hex;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 100'000'000;
  std::string seed = "6198";
  std::string python = "/usr/bin/python3";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--n") == 0) {
      n = std::atoll(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--seed") == 0) {
      seed = argv[i + 1];
    } else if (std::strcmp(argv[i], "--python") == 0) {
      python = argv[i + 1];
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  auto words = gridfeed::order::ParseSeedWords(seed);
  if (n < 1 || n >= 0xffffffffLL || !words.ok()) {
    std::fprintf(stderr, "need 1 <= --n < 2^32 - 1 and a decimal --seed\n");
    return 2;
  }

  std::vector<uint32_t> a(static_cast<size_t>(n));
  std::iota(a.begin(), a.end(), uint32_t{0});
  const auto t0 = Clock::now();
  gridfeed::order::Pcg64 rng(*words);
  gridfeed::order::ShuffleUint32(rng, a);
  const double ours = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::string our_sha =
      gridfeed::testing::Sha256Hex(std::as_bytes(std::span<const uint32_t>(a)));
  a.clear();
  a.shrink_to_fit();  // numpy needs the memory next

  double theirs = 0;
  std::string their_sha;
  if (!RunNumpy(python, n, seed, &theirs, &their_sha)) return 1;

  std::printf("shuffle of arange(%lld, uint32), seed %s\n", static_cast<long long>(n),
              seed.c_str());
  std::printf("  gridfeed ShuffleUint32        %8.3f s  sha256 %s\n", ours, our_sha.c_str());
  std::printf("  numpy Generator(PCG64).shuffle %7.3f s  sha256 %s\n", theirs, their_sha.c_str());
  std::printf("  speed-up over numpy (same run): %.2fx\n", theirs / ours);
  if (our_sha != their_sha) {
    std::printf("  PERMUTATIONS DIFFER\n");
    return 1;
  }
  std::printf("  permutations identical\n");
  return 0;
}
