#include "gridfeed/parallel/agree.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <thread>

#include "gridfeed/core/memory_usage.h"

namespace gridfeed::parallel {

Status MpiStatus(int code, const char* call) {
  if (code == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return Status(StatusCode::kAborted, std::string(call) + " failed: " + std::string(text, len));
}

namespace {

constexpr size_t kChunk = size_t{1} << 30;  // well below INT_MAX

// Waits for `request`, sleeping between tests (backing off from 20 us to 5 ms).
Status SleepUntilDone(MPI_Request* request) {
  auto delay = std::chrono::microseconds(20);
  for (;;) {
    int done = 0;
    GRIDFEED_RETURN_IF_ERROR(MpiStatus(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test"));
    if (done) return Status::Ok();
    std::this_thread::sleep_for(delay);
    delay = std::min<std::chrono::microseconds>(delay * 2, std::chrono::milliseconds(5));
  }
}

}  // namespace

Status ExchangeBytes(MPI_Comm comm, int rank_name, std::span<const std::span<const std::byte>> send,
                     std::vector<std::vector<std::byte>>* received) {
  int size = 0, rank = 0;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  Status local;
  std::vector<uint64_t> out(static_cast<size_t>(size), 0), in(static_cast<size_t>(size), 0);
  if (send.size() != static_cast<size_t>(size)) {
    local = Internal("ExchangeBytes: " + std::to_string(send.size()) + " parts for " +
                     std::to_string(size) + " ranks");
  } else {
    for (int q = 0; q < size; ++q) out[q] = send[q].size();
  }
  GRIDFEED_RETURN_IF_ERROR(MpiStatus(
      MPI_Alltoall(out.data(), 1, MPI_UINT64_T, in.data(), 1, MPI_UINT64_T, comm), "MPI_Alltoall"));
  // What arrives is bounded by the memory this rank can get, and allocated, before anything is
  // posted: a rank that cannot take it must not leave its peers waiting for its sends.
  if (local.ok()) {
    try {
      double total = 0;
      for (uint64_t n : in) total += static_cast<double>(n);
      local = CheckMemoryFor(
          total,
          "the bytes this rank receives (" + std::to_string(static_cast<uint64_t>(total)) + ")",
          "");
      if (local.ok()) {
        received->assign(static_cast<size_t>(size), {});
        for (int q = 0; q < size; ++q) (*received)[q].resize(static_cast<size_t>(in[q]));
      }
    } catch (const std::bad_alloc&) {
      local = Internal("out of memory for the bytes this rank receives");
    }
  }
  GRIDFEED_RETURN_IF_ERROR(AgreeOnStatus(comm, local, rank_name));
  // Posted: from here a failure leaves peers waiting for this rank, so it ends the job.
  auto end_job = [&](const Status& st) {
    std::fprintf(stderr, "gridfeed: rank %d: exchange among %d ranks failed: %s; ending the job\n",
                 rank_name, size, st.ToString().c_str());
    std::fflush(stderr);
    MPI_Abort(comm, 1);
    std::abort();
  };
  std::vector<MPI_Request> requests;
  for (int q = 0; q < size; ++q) {
    auto& r = (*received)[q];
    for (size_t at = 0; at < r.size(); at += kChunk) {
      requests.emplace_back();
      const Status posted =
          MpiStatus(MPI_Irecv(r.data() + at, static_cast<int>(std::min(kChunk, r.size() - at)),
                              MPI_BYTE, q, 705, comm, &requests.back()),
                    "MPI_Irecv");
      if (!posted.ok()) end_job(posted);
    }
  }
  for (int q = 0; q < size; ++q) {
    for (size_t at = 0; at < send[q].size(); at += kChunk) {
      requests.emplace_back();
      const Status posted = MpiStatus(
          MPI_Isend(send[q].data() + at, static_cast<int>(std::min(kChunk, send[q].size() - at)),
                    MPI_BYTE, q, 705, comm, &requests.back()),
          "MPI_Isend");
      if (!posted.ok()) end_job(posted);
    }
  }
  auto delay = std::chrono::microseconds(20);
  for (;;) {
    int done = 0;
    const Status tested = MpiStatus(
        MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE),
        "MPI_Testall");
    if (!tested.ok()) end_job(tested);
    if (done) return Status::Ok();
    std::this_thread::sleep_for(delay);
    delay = std::min<std::chrono::microseconds>(delay * 2, std::chrono::milliseconds(5));
  }
}

Status SleepyBarrier(MPI_Comm comm) {
  MPI_Request request;
  GRIDFEED_RETURN_IF_ERROR(MpiStatus(MPI_Ibarrier(comm, &request), "MPI_Ibarrier"));
  return SleepUntilDone(&request);
}

Status SendBytes(MPI_Comm comm, int dest, int tag, std::span<const std::byte> bytes) {
  for (size_t at = 0; at < bytes.size(); at += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, bytes.size() - at));
    GRIDFEED_RETURN_IF_ERROR(
        MpiStatus(MPI_Send(bytes.data() + at, n, MPI_BYTE, dest, tag, comm), "MPI_Send"));
  }
  return Status::Ok();
}

Status SleepyReceiveBytes(MPI_Comm comm, int source, int tag, std::span<std::byte> bytes) {
  for (size_t at = 0; at < bytes.size(); at += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, bytes.size() - at));
    MPI_Request request;
    GRIDFEED_RETURN_IF_ERROR(MpiStatus(
        MPI_Irecv(bytes.data() + at, n, MPI_BYTE, source, tag, comm, &request), "MPI_Irecv"));
    GRIDFEED_RETURN_IF_ERROR(SleepUntilDone(&request));
  }
  return Status::Ok();
}

bool AllEqual(MPI_Comm comm, uint64_t value) {
  uint64_t lo = 0, hi = 0;
  MPI_Allreduce(&value, &lo, 1, MPI_UINT64_T, MPI_MIN, comm);
  MPI_Allreduce(&value, &hi, 1, MPI_UINT64_T, MPI_MAX, comm);
  return lo == hi;
}

Status BroadcastString(MPI_Comm comm, int root, std::string* s) {
  uint64_t n = s->size();
  GRIDFEED_RETURN_IF_ERROR(MpiStatus(MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm), "MPI_Bcast"));
  s->resize(n);
  return BroadcastBytes(comm, root, std::as_writable_bytes(std::span(s->data(), s->size())));
}

Status BroadcastStatus(MPI_Comm comm, int root, const Status& status) {
  int code = static_cast<int>(status.code());
  GRIDFEED_RETURN_IF_ERROR(MpiStatus(MPI_Bcast(&code, 1, MPI_INT, root, comm), "MPI_Bcast"));
  if (code == 0) return Status::Ok();  // every rank knows: no message follows
  std::string message = status.message();
  GRIDFEED_RETURN_IF_ERROR(BroadcastString(comm, root, &message));
  return Status(static_cast<StatusCode>(code), message);
}

Status AgreeOnStatus(MPI_Comm comm, const Status& local, int rank_name) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  int mine = local.ok() ? INT_MAX : rank;
  int first = INT_MAX;
  GRIDFEED_RETURN_IF_ERROR(
      MpiStatus(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce"));
  if (first == INT_MAX) return Status::Ok();
  int name = rank_name;
  GRIDFEED_RETURN_IF_ERROR(MpiStatus(MPI_Bcast(&name, 1, MPI_INT, first, comm), "MPI_Bcast"));
  // A status agreed before (on a node, then on the world) names its rank once.
  const std::string tag = "rank " + std::to_string(name);
  Status s = local.ok() || local.message().starts_with(tag + ": ") ? local : local.WithContext(tag);
  return BroadcastStatus(comm, first, s);
}

Status BroadcastBytes(MPI_Comm comm, int root, std::span<std::byte> bytes) {
  for (size_t at = 0; at < bytes.size(); at += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, bytes.size() - at));
    GRIDFEED_RETURN_IF_ERROR(
        MpiStatus(MPI_Bcast(bytes.data() + at, n, MPI_BYTE, root, comm), "MPI_Bcast"));
  }
  return Status::Ok();
}

}  // namespace gridfeed::parallel
