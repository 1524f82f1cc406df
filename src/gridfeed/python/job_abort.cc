#include "gridfeed/python/job_abort.h"

#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace gridfeed::python {
namespace py = pybind11;
namespace {

// World rank and size while MPI is usable; size 0 otherwise.
void WorldOf(int* rank, int* size) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  *rank = 0;
  *size = 0;
  if (initialized && !finalized) {
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
  }
}

// SIGINT bookkeeping. The handler only bumps an atomic counter and chains the handler it
// replaced (Python's, which raises KeyboardInterrupt later on the main thread).
std::atomic<unsigned long long> g_sigints{0};
struct sigaction g_previous;  // valid while W().depth > 0 and W().installed

void OnSigint(int sig, siginfo_t* info, void* context) {
  g_sigints.fetch_add(1, std::memory_order_relaxed);  // lock-free: async-signal-safe
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  }
}

// Never destroyed: the detached watchdog thread waits on the condition variable until the
// process ends (glibc's pthread_cond_destroy would wait for it at exit).
struct WatchState {
  std::mutex mu;  // guards the rest
  std::condition_variable cv;
  int depth = 0;                      // active watches (all threads, all feeders)
  bool installed = false;             // OnSigint is the SIGINT handler
  unsigned long long generation = 0;  // bumped when depth goes 0 -> 1
  unsigned long long base = 0;        // g_sigints then
  std::string what;                   // what the first active watch waits in
  bool abort = true;                  // every active watch may abort (none saw a user handler)
  bool watchdog = false;
};
WatchState& W() {
  static auto* state = new WatchState;
  return *state;
}

// Aborts the job when SIGINT arrived during a watch that is still active kInterruptGraceSeconds
// after the signal was noticed.
void Watchdog() {
  std::unique_lock lock(W().mu);
  unsigned long long generation = 0;
  std::chrono::steady_clock::time_point noticed{};
  bool seen = false;
  for (;;) {  // polls at 20 Hz (nobody notifies: next() stays cheap)
    W().cv.wait_for(lock, std::chrono::milliseconds(50));
    if (W().depth == 0 || !W().abort || g_sigints.load() <= W().base) {
      seen = false;
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!seen || generation != W().generation) {
      seen = true;
      generation = W().generation;
      noticed = now;
      continue;
    }
    if (now - noticed > std::chrono::duration<double>(kInterruptGraceSeconds)) {
      const std::string what = W().what;
      lock.unlock();
      AbortJob("interrupted (SIGINT) in " + what + ", which still waits " +
               std::to_string(static_cast<int>(kInterruptGraceSeconds)) +
               " s later (a peer may be dead or stuck): a collective cannot be left midway, "
               "so the job ends");
    }
  }
}

// Feeders opened and not closed collectively (given-up ones stay counted).
std::atomic<long long> g_unclosed{0};
// The code the main thread last asked sys.exit for (valid when g_exit_known).
std::atomic<bool> g_exit_known{false};
std::atomic<int> g_exit_code{0};

// What Python's exit status is for a SystemExit's code.
int ExitStatusOf(py::handle code) {
  if (code.is_none()) return 0;
  if (PyLong_Check(code.ptr())) {
    const long v = PyLong_AsLong(code.ptr());
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return 1;
    }
    return static_cast<int>(v);
  }
  return 1;
}

}  // namespace

void NoteFeederOpened() { g_unclosed.fetch_add(1); }
void NoteFeederClosed() { g_unclosed.fetch_sub(1); }

void InstallExitHook(py::module_& m) {
  py::module_ sys = py::module_::import("sys");
  m.attr("_previous_exit") = sys.attr("exit");
  m.def(
      "_exit",
      [](py::args args) {
        py::module_ threading = py::module_::import("threading");
        if (threading.attr("current_thread")().is(threading.attr("main_thread")())) {
          py::object code = py::none();
          if (args.size() > 0) code = args[0];
          g_exit_code = ExitStatusOf(code);
          g_exit_known = true;
        }
        py::module_::import("gridfeed").attr("_previous_exit")(*args);
      },
      "sys.exit while gridfeed is imported: notes the exit code for the end-of-script check "
      "(job_abort.h), then calls the previous sys.exit (gridfeed._previous_exit)");
  sys.attr("exit") = m.attr("_exit");
  m.def(
      "_atexit",
      [] {
        int rank = 0, size = 0;
        WorldOf(&rank, &size);
        const long long unclosed = g_unclosed.load();
        if (size <= 1 || unclosed <= 0) return;
        const bool known = g_exit_known.load();
        const int code = g_exit_code.load();
        std::string how = known ? "exit code " + std::to_string(code) + " (sys.exit)"
                                : "exit code unknown: the script's end, or SystemExit raised "
                                  "directly";
        py::module_ sys = py::module_::import("sys");
        for (const char* stream : {"stdout", "stderr"}) {
          try {
            sys.attr(stream).attr("flush")();
          } catch (py::error_already_set&) {
            PyErr_Clear();
          }
        }
        std::fprintf(stderr,
                     "gridfeed: error (rank %d of %d): this rank ends (%s) with %lld "
                     "gridfeed.Feeder not closed on every rank (close() or a with block left "
                     "normally); its peers may wait for it in a collective, so the job ends "
                     "(MPI_Abort)\n",
                     rank, size, how.c_str(), unclosed);
        std::fflush(stderr);
        // An exit status is the code's low byte: 256 would read as success.
        MPI_Abort(MPI_COMM_WORLD, known && (code & 0xff) != 0 ? code : 1);
      },
      "atexit handler: a rank of an MPI job ending with a Feeder not closed ends the job");
  py::module_::import("atexit").attr("register")(m.attr("_atexit"));
}

void AbortJob(const std::string& message) {
  int rank = 0, size = 0;
  WorldOf(&rank, &size);
  std::fprintf(stderr, "gridfeed: error (rank %d of %d): %s\n", rank, size, message.c_str());
  std::fflush(stderr);
  if (size > 0) MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

bool SigintIsPythonsDefault() {
  // Called on every next(): the lookups once, kept for the process's life (never destroyed, as
  // Python may be finalised before static destructors run). No function-local static: its guard,
  // held while the import inside may let another thread take the GIL, deadlocked the first
  // next() of two threads (that thread waited for the guard holding the GIL). Under the GIL, a
  // plain pointer; the module's import makes the first call.
  struct Lookups {
    pybind11::object getsignal, sigint, default_handler;
  };
  static const Lookups* l = nullptr;  // constant-initialised: no guard
  if (l == nullptr) {
    pybind11::module_ signal = pybind11::module_::import("signal");
    auto* made = new Lookups{signal.attr("getsignal"), signal.attr("SIGINT"),
                             signal.attr("default_int_handler")};
    if (l == nullptr) {
      l = made;  // a thread that made its own meanwhile keeps the first
    } else {
      delete made;
    }
  }
  return l->getsignal(l->sigint).is(l->default_handler);
}

InterruptWatch::InterruptWatch(const char* what, bool abort_when_stuck) {
  std::lock_guard lock(W().mu);
  start_count_ = g_sigints.load();
  if (W().depth++ == 0) {
    ++W().generation;
    W().base = start_count_;
    W().what = what;
    W().abort = abort_when_stuck;
    struct sigaction current;
    sigaction(SIGINT, nullptr, &current);
    // Only over a handler function (Python's): SIG_DFL ends the process anyway, SIG_IGN asked
    // for nothing to happen.
    const bool function = (current.sa_flags & SA_SIGINFO) ||
                          (current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN);
    W().installed = false;
    if (function) {
      g_previous = current;
      struct sigaction mine = {};
      mine.sa_sigaction = OnSigint;
      mine.sa_flags = SA_SIGINFO | (current.sa_flags & SA_ONSTACK);
      sigemptyset(&mine.sa_mask);
      W().installed = sigaction(SIGINT, &mine, nullptr) == 0;
    }
    if (!W().watchdog) {
      std::thread(Watchdog).detach();
      W().watchdog = true;
    }
  } else {
    W().abort = W().abort && abort_when_stuck;
  }
}

InterruptWatch::~InterruptWatch() {
  std::lock_guard lock(W().mu);
  if (--W().depth == 0 && W().installed) {
    sigaction(SIGINT, &g_previous, nullptr);
    W().installed = false;
  }
}

bool InterruptWatch::interrupted() const { return g_sigints.load() > start_count_; }

namespace {

// `text` in one write to sys.stderr, or to file descriptor 2 where sys.stderr is None or fails.
void WriteToStderr(const std::string& text) {
  try {
    py::object stream = py::module_::import("sys").attr("stderr");
    if (!stream.is_none()) {
      stream.attr("write")(text);
      return;
    }
  } catch (py::error_already_set&) {
    PyErr_Clear();
  }
  for (size_t at = 0; at < text.size();) {
    const ssize_t n = ::write(2, text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    at += static_cast<size_t>(n);
  }
}

}  // namespace

void InstallExceptHook(py::module_& m) {
  py::module_ sys = py::module_::import("sys");
  m.attr("_previous_excepthook") = sys.attr("excepthook");
  m.def(
      "_excepthook",
      [](py::object type, py::object value, py::object traceback) {
        int rank = 0, size = 0;
        WorldOf(&rank, &size);
        py::module_ sys = py::module_::import("sys");
        // Looked up under a guard: an exception escaping this hook would skip the abort.
        py::object previous = sys.attr("__excepthook__");
        try {
          previous = py::module_::import("gridfeed").attr("_previous_excepthook");
        } catch (py::error_already_set&) {
          PyErr_Clear();
        }
        const bool abort = size > 1;
        std::string header;
        if (abort) {
          std::string name = "exception";
          if (py::hasattr(type, "__name__")) name = py::str(type.attr("__name__"));
          header = "gridfeed: error (rank " + std::to_string(rank) + " of " + std::to_string(size) +
                   "): uncaught " + name + "; the job ends (MPI_Abort) after its traceback:\n";
        }
        // Under Python's own hook, the line and the traceback go out as one write: ranks
        // failing together would otherwise interleave its many small writes in mpirun's
        // output. A hook of the user's prints its own way, on the real stream, after the line.
        bool printed = false;
        if (abort && previous.is(sys.attr("__excepthook__"))) {
          try {
            py::object lines =
                py::module_::import("traceback").attr("format_exception")(type, value, traceback);
            WriteToStderr(header + py::str("").attr("join")(lines).cast<std::string>());
            printed = true;
          } catch (py::error_already_set&) {
            PyErr_Clear();  // e.g. text that is not UTF-8: printed the usual way below
          }
        }
        if (!printed) {
          if (abort) WriteToStderr(header);
          try {
            previous(type, value, traceback);
          } catch (py::error_already_set&) {
            // The chained hook failed: print the original the default way.
            PyErr_Clear();
            try {
              sys.attr("__excepthook__")(type, value, traceback);
            } catch (py::error_already_set&) {
              PyErr_Clear();
            }
          }
        }
        for (const char* stream : {"stdout", "stderr"}) {
          try {
            sys.attr(stream).attr("flush")();
          } catch (py::error_already_set&) {
            PyErr_Clear();
          }
        }
        if (abort) {
          std::fflush(stderr);
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
      },
      "sys.excepthook while gridfeed is imported: an uncaught exception on a rank of an MPI job "
      "of more than one process prints its traceback and ends the whole job (MPI_Abort); the "
      "previous hook (gridfeed._previous_excepthook) prints it");
  sys.attr("excepthook") = m.attr("_excepthook");
}

}  // namespace gridfeed::python
