// The Open MPI communicator (CPU ranks): host buffers, MPI_COMM_WORLD, blocking collectives (and
// one polled broadcast for long waits).
#include <mpi.h>

#include <chrono>
#include <string>
#include <thread>

#include "dist/communicator.h"

namespace frugal::dist {
namespace {

Result<MPI_Datatype> mpi_type(DType t, const char* what) {
  switch (t) {
    case DType::kF32: return MPI_FLOAT;
    case DType::kF64: return MPI_DOUBLE;
    case DType::kI32: return MPI_INT32_T;
    case DType::kI64: return MPI_INT64_T;
    case DType::kU8: return MPI_UINT8_T;
    default: break;
  }
  return unsupported(std::string(what) + ": MPI has no sum for dtype " + dtype_name(t) +
                     " (CPU ranks run f32 activations)");
}

Status mpi_status(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status::ok();
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return internal_error(std::string("MPI ") + what + ": " + std::string(msg, static_cast<size_t>(len)));
}

Status check_count(int64_t count, const char* what) {
  if (count < 0 || count > INT32_MAX)
    return invalid_argument(std::string(what) + ": count " + std::to_string(count) + " outside [0, 2^31)");
  return Status::ok();
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(int rank, int world, bool finalize) : rank_(rank), world_(world), finalize_(finalize) {}
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalize_ && !finalized) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string name() const override { return "mpi"; }

  Status all_reduce_sum(void* buf, int64_t count, DType dtype) override {
    FRUGAL_RETURN_IF_ERROR(check_count(count, "all_reduce_sum"));
    FRUGAL_ASSIGN_OR_RETURN(MPI_Datatype t, mpi_type(dtype, "all_reduce_sum"));
    if (count == 0) return Status::ok();
    return mpi_status(MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(count), t, MPI_SUM, MPI_COMM_WORLD),
                      "all_reduce_sum");
  }
  Status all_gather(const void* send, void* recv, int64_t count, DType dtype) override {
    FRUGAL_RETURN_IF_ERROR(check_count(count, "all_gather"));
    if (count == 0) return Status::ok();
    // Raw bytes: gathering needs no arithmetic, so any dtype goes.
    const int64_t bytes = dtype_bytes(dtype, count);
    FRUGAL_RETURN_IF_ERROR(check_count(bytes, "all_gather"));
    return mpi_status(MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE,
                                    MPI_COMM_WORLD),
                      "all_gather");
  }
  Status broadcast(void* buf, int64_t count, DType dtype, int root) override {
    return broadcast_host(buf, dtype_bytes(dtype, count), root);
  }
  Status broadcast_host(void* buf, int64_t bytes, int root) override {
    FRUGAL_RETURN_IF_ERROR(check_count(bytes, "broadcast"));
    if (root < 0 || root >= world_) return invalid_argument("broadcast: root " + std::to_string(root) + " outside the world");
    if (bytes == 0) return Status::ok();
    return mpi_status(MPI_Bcast(buf, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "broadcast");
  }
  Status broadcast_host_waiting(void* buf, int64_t bytes, int root) override {
    FRUGAL_RETURN_IF_ERROR(check_count(bytes, "broadcast"));
    if (root < 0 || root >= world_) return invalid_argument("broadcast: root " + std::to_string(root) + " outside the world");
    if (bytes == 0) return Status::ok();
    MPI_Request req;
    FRUGAL_RETURN_IF_ERROR(mpi_status(MPI_Ibcast(buf, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD, &req), "broadcast"));
    // Poll hot for a moment (a busy server's next step is microseconds away), then sleep 0.1 ms,
    // then 1 ms between polls: an idle rank costs a fraction of a core, the first request after
    // idling at most a millisecond.
    for (int64_t polls = 0;; ++polls) {
      int done = 0;
      FRUGAL_RETURN_IF_ERROR(mpi_status(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "broadcast"));
      if (done) return Status::ok();
      if (polls > 2000) std::this_thread::sleep_for(std::chrono::microseconds(polls > 12000 ? 1000 : 100));
    }
  }
  Status barrier() override { return mpi_status(MPI_Barrier(MPI_COMM_WORLD), "barrier"); }

 private:
  int rank_, world_;
  bool finalize_;
};

}  // namespace

bool mpi_built() { return true; }

Result<std::unique_ptr<Communicator>> make_mpi_communicator() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return internal_error("MPI was already finalized in this process");
  if (!initialized) {
    int provided = 0;
    FRUGAL_RETURN_IF_ERROR(mpi_status(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "init"));
    // The engine thread, not the main one, runs the collectives (one thread at a time).
    if (provided < MPI_THREAD_SERIALIZED) return unsupported("this MPI library cannot be called from the engine thread (MPI_THREAD_SERIALIZED)");
  }
  // Errors come back as codes (turned into Status), not as an abort of every rank.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  return std::unique_ptr<Communicator>(new MpiCommunicator(rank, world, !initialized));
}

}  // namespace frugal::dist
