#include "gridfeed/core/memory_usage.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace gridfeed {
namespace {

// The value of `key` (e.g. "VmHWM:") in /proc/self/status, in bytes.
int64_t StatusKiB(const char* key) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  int64_t out = -1;
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof(line), f)) {
    long long kib = 0;
    if (std::strncmp(line, key, n) == 0 && std::sscanf(line + n, "%lld", &kib) == 1) {
      out = static_cast<int64_t>(kib) * 1024;
      break;
    }
  }
  std::fclose(f);
  return out;
}

}  // namespace

int64_t PeakResidentBytes() { return StatusKiB("VmHWM:"); }
int64_t ResidentBytes() { return StatusKiB("VmRSS:"); }

bool ResetPeakResident() {
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return ok;
}

}  // namespace gridfeed
