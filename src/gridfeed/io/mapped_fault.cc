#include "gridfeed/io/mapped_fault.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "gridfeed/core/log.h"
#include "gridfeed/io/file_util.h"

namespace gridfeed::io {

// A registered mapping. Free (0), being written or cleared (1), or live (2): the handler reads
// only live slots, and only the path of the one its address falls in (a mapping being unmapped
// while read from is a bug of its own).
struct MappedSlot {
  std::atomic<int> state{0};
  std::atomic<uintptr_t> base{0};
  std::atomic<size_t> size{0};
  dev_t dev = 0;
  ino_t ino = 0;
  char* path = nullptr;  // malloc'd while live
};

namespace {

// Slots in chunks that are never freed (the handler may walk them at any time); a chunk is
// appended when every earlier one is full, as file_util.cc's temporaries.
constexpr int kSlotsPerChunk = 64;
struct MappedChunk {
  MappedSlot slots[kSlotsPerChunk];
  std::atomic<MappedChunk*> next{nullptr};
};
constinit MappedChunk g_first;
std::atomic<MappedChunk*> g_hint{&g_first};

std::atomic<void (*)()> g_end_job{nullptr};
std::atomic<bool> g_reporting{false};
std::mutex g_install_mu;
struct sigaction g_previous;  // the SIGBUS disposition before ours (written under the mutex)

MappedSlot* TryClaim(MappedChunk* c) {
  for (MappedSlot& s : c->slots) {
    int expected = 0;
    if (s.state.load(std::memory_order_relaxed) == 0 &&
        s.state.compare_exchange_strong(expected, 1)) {
      return &s;
    }
  }
  return nullptr;
}

MappedSlot* Claim() {
  MappedChunk* const start = g_hint.load(std::memory_order_acquire);
  for (MappedChunk* c = start; c != nullptr; c = c->next.load(std::memory_order_acquire)) {
    if (MappedSlot* s = TryClaim(c)) {
      g_hint.store(c, std::memory_order_release);
      return s;
    }
  }
  for (MappedChunk* c = &g_first;;) {
    if (MappedSlot* s = TryClaim(c)) {
      g_hint.store(c, std::memory_order_release);
      return s;
    }
    MappedChunk* next = c->next.load(std::memory_order_acquire);
    if (next == nullptr) {
      auto* fresh = new MappedChunk;
      if (!c->next.compare_exchange_strong(next, fresh, std::memory_order_acq_rel)) {
        delete fresh;  // another thread appended first; `next` is its chunk
      } else {
        next = fresh;
      }
    }
    c = next;
  }
}

MappedSlot* Find(uintptr_t addr) {
  for (MappedChunk* c = &g_first; c != nullptr; c = c->next.load(std::memory_order_acquire)) {
    for (MappedSlot& s : c->slots) {
      if (s.state.load(std::memory_order_acquire) != 2) continue;
      const uintptr_t base = s.base.load(std::memory_order_relaxed);
      if (addr >= base && addr - base < s.size.load(std::memory_order_relaxed)) return &s;
    }
  }
  return nullptr;
}

// A message built without allocating (async-signal-safe), cut at its capacity.
struct Message {
  char text[8192];
  size_t n = 0;
  void Add(const char* s) {
    while (*s != '\0' && n < sizeof(text)) text[n++] = *s++;
  }
  void Add(uint64_t v) {
    char digits[24];
    int k = 0;
    do {
      digits[k++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (k > 0 && n < sizeof(text)) text[n++] = digits[--k];
  }
};
Message g_message;  // only the one reporting thread writes it

void WriteAll(const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Says what became of the file: its state now, from stat (async-signal-safe).
void Describe(Message& m, const MappedSlot& s, uint64_t offset) {
  const uint64_t was = s.size.load(std::memory_order_relaxed);
  struct stat st;
  const bool exists = ::stat(s.path, &st) == 0;
  const bool same = exists && st.st_dev == s.dev && st.st_ino == s.ino;
  const uint64_t now = same ? static_cast<uint64_t>(st.st_size) : 0;
  m.Add("'");
  m.Add(s.path);
  if (same && now > offset) {
    m.Add("' could not be read at offset ");
    m.Add(offset);
    m.Add(
        " (SIGBUS although the file holds that byte: an I/O error, or it was truncated and "
        "grew again under the job; it is now ");
  } else {
    m.Add("' changed under the job (truncated while mapped: a read at offset ");
    m.Add(offset);
    m.Add(" faulted; ");
    if (!same) {
      m.Add(exists ? "the path names another file now; it was "
                   : "the path names no file now; "
                     "it was ");
      m.Add(was);
      m.Add(" bytes when mapped)");
      return;
    }
    m.Add("it is now ");
  }
  m.Add(now);
  m.Add(" bytes, ");
  m.Add(was);
  m.Add(" when mapped)");
}

void ChainToPrevious(int sig, siginfo_t* info, void* context) {
  const struct sigaction prev = g_previous;
  const bool is_function = (prev.sa_flags & SA_SIGINFO) != 0
                               ? prev.sa_sigaction != nullptr
                               : prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN;
  if (is_function) {
    if ((prev.sa_flags & SA_SIGINFO) != 0) {
      prev.sa_sigaction(sig, info, context);
    } else {
      prev.sa_handler(sig);
    }
    return;
  }
  // The default (or ignored): take it. A fault re-executes its instruction on return and is
  // delivered again; a signal that was sent is raised again (pending until this returns).
  ::sigaction(sig, &prev, nullptr);
  if (info == nullptr || info->si_code <= 0) ::raise(sig);
}

extern "C" void OnBusFault(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  MappedSlot* hit = nullptr;
  if (info != nullptr && info->si_code > 0) {  // raised by the kernel for an access
    hit = Find(reinterpret_cast<uintptr_t>(info->si_addr));
  }
  if (hit == nullptr) {
    ChainToPrevious(sig, info, context);
    errno = saved_errno;
    return;
  }
  // One thread reports and ends the process; any other that faults waits for it.
  if (g_reporting.exchange(true)) {
    for (;;) ::pause();
  }
  Message& m = g_message;
  m.Add("gridfeed: error (rank ");
  m.Add(static_cast<uint64_t>(log::CurrentRank()));
  m.Add("): ");
  Describe(m, *hit,
           reinterpret_cast<uintptr_t>(info->si_addr) - hit->base.load(std::memory_order_relaxed));
  m.Add("; the job ends\n");
  WriteAll(m.text, m.n);
  RemoveLiveTemporaries();
  if (void (*end_job)() = g_end_job.load(); end_job != nullptr) {
    // If ending the job hangs (it is no async-signal-safe call), SIGALRM's default ends this
    // process, and the launcher the job.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGALRM, &dfl, nullptr);
    sigset_t alarm_only;
    sigemptyset(&alarm_only);
    sigaddset(&alarm_only, SIGALRM);
    ::sigprocmask(SIG_UNBLOCK, &alarm_only, nullptr);
    ::alarm(30);
    end_job();
  }
  ::_exit(1);
}

void InstallHandler() {
  std::lock_guard lock(g_install_mu);
  struct sigaction current;
  if (::sigaction(SIGBUS, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == OnBusFault) return;
  struct sigaction mine {};
  mine.sa_sigaction = OnBusFault;
  mine.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&mine.sa_mask);
  g_previous = current;
  ::sigaction(SIGBUS, &mine, nullptr);
}

}  // namespace

MappedSlot* RegisterMapping(const void* base, size_t size, const std::string& path, dev_t dev,
                            ino_t ino) {
  InstallHandler();
  char* copy = ::strdup(path.c_str());
  if (copy == nullptr) return nullptr;
  MappedSlot* s = Claim();
  s->base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_relaxed);
  s->size.store(size, std::memory_order_relaxed);
  s->dev = dev;
  s->ino = ino;
  s->path = copy;
  s->state.store(2, std::memory_order_release);
  return s;
}

void UnregisterMapping(MappedSlot* slot) {
  if (slot == nullptr) return;
  slot->state.store(1, std::memory_order_release);
  std::free(std::exchange(slot->path, nullptr));
  slot->state.store(0, std::memory_order_release);
}

void SetMappedFaultEnd(void (*end_job)()) {
  g_end_job.store(end_job);
  InstallHandler();
}

void EndJobOnChangedStore(const std::string& what) {
  const std::string line = "gridfeed: error (rank " + std::to_string(log::CurrentRank()) +
                           "): " + what + "; the job ends\n";
  WriteAll(line.data(), line.size());
  RemoveLiveTemporaries();
  if (void (*end_job)() = g_end_job.load(); end_job != nullptr) end_job();
  std::_Exit(1);
}

}  // namespace gridfeed::io
