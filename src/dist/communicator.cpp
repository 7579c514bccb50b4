#include "dist/communicator.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace frugal::dist {
namespace {

class SingleCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string name() const override { return "single"; }
  Status all_reduce_sum(void*, int64_t count, DType) override { return check(count); }
  Status all_gather(const void* send, void* recv, int64_t count, DType dtype) override {
    FRUGAL_RETURN_IF_ERROR(check(count));
    // Host memory only: a single rank on a device backend never gathers (the model skips it).
    if (send != recv && count > 0) std::memmove(recv, send, static_cast<size_t>(dtype_bytes(dtype, count)));
    return Status::ok();
  }
  Status broadcast(void*, int64_t count, DType, int root) override {
    FRUGAL_RETURN_IF_ERROR(check(count));
    return root == 0 ? Status::ok() : invalid_argument("broadcast: root " + std::to_string(root) + " of 1 rank");
  }
  Status broadcast_host(void*, int64_t bytes, int root) override {
    FRUGAL_RETURN_IF_ERROR(check(bytes));
    return root == 0 ? Status::ok() : invalid_argument("broadcast_host: root " + std::to_string(root) + " of 1 rank");
  }
  Status barrier() override { return Status::ok(); }

 private:
  static Status check(int64_t count) {
    return count < 0 ? invalid_argument("collective: negative count " + std::to_string(count)) : Status::ok();
  }
};

Result<int> env_int(const char* name, int fallback, int lo) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < lo || x > 1 << 20)
    return invalid_argument(std::string("environment variable ") + name + "='" + v + "': expected an integer >= " +
                            std::to_string(lo));
  return static_cast<int>(x);
}

}  // namespace

std::unique_ptr<Communicator> make_single_communicator() { return std::make_unique<SingleCommunicator>(); }

bool started_by_mpi_launcher() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

Result<RankEnv> rank_env_from_environment() {
  RankEnv e;
  FRUGAL_ASSIGN_OR_RETURN(e.rank, env_int("RANK", 0, 0));
  FRUGAL_ASSIGN_OR_RETURN(e.world_size, env_int("WORLD_SIZE", 1, 1));
  FRUGAL_ASSIGN_OR_RETURN(e.local_rank, env_int("LOCAL_RANK", e.rank, 0));
  FRUGAL_ASSIGN_OR_RETURN(e.master_port, env_int("MASTER_PORT", e.master_port, 1));
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) e.master_addr = a;
  FRUGAL_RETURN_IF_ERROR(validate(e));
  return e;
}

Status validate(const RankEnv& e) {
  if (e.world_size < 1) return invalid_argument("world size " + std::to_string(e.world_size) + " must be >= 1");
  if (e.rank < 0 || e.rank >= e.world_size)
    return invalid_argument("rank " + std::to_string(e.rank) + " is outside world size " + std::to_string(e.world_size));
  if (e.local_rank < 0) return invalid_argument("local rank " + std::to_string(e.local_rank) + " must be >= 0");
  if (e.master_port < 1 || e.master_port > 65535)
    return invalid_argument("master port " + std::to_string(e.master_port) + " is not a TCP port (1..65535)");
  if (e.master_addr.empty()) return invalid_argument("master address is empty");
  return Status::ok();
}

#ifndef FRUGAL_WITH_MPI
bool mpi_built() { return false; }
Result<std::unique_ptr<Communicator>> make_mpi_communicator() {
  return unsupported("this frugal was built without MPI (install libopenmpi-dev and reconfigure)");
}
#endif
#ifndef FRUGAL_WITH_NCCL
bool nccl_built() { return false; }
Result<std::unique_ptr<Communicator>> make_nccl_communicator(const RankEnv&, void*) {
  return unsupported("this frugal was built without NCCL (a CUDA build with NCCL: -DFRUGAL_CUDA=ON)");
}
#endif

}  // namespace frugal::dist
