// Collective communication between the ranks of one tensor-parallel model: the interface the
// model layer calls, and the three implementations (one process per rank each):
//   single : world size 1, every collective a no-op (or a copy); what a plain run uses.
//   mpi    : Open MPI over host memory (CPU ranks; started by mpirun). Built when CMake finds MPI.
//   nccl   : NCCL over device memory on one CUDA stream (GPU ranks; started by frugal itself or
//            torchrun-style, the NCCL unique id exchanged over dist/tcp_store.h). Built with CUDA.
// Buffers passed to the collectives are backend memory (host for MPI, device for NCCL) and the
// collectives are ordered with the backend's ops (MPI: the CPU backend runs ops inline; NCCL:
// enqueued on the backend's stream, so they can be captured into CUDA graphs).
// broadcast_host is for control data in host memory (the scheduler's step on rank 0).
//
// One communicator per rank, owned by whoever starts the rank (the CLI verb or a test main);
// the model keeps a non-owning pointer. No collective is implemented here: they are MPI's/NCCL's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace frugal::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string name() const = 0;  // "single", "mpi", "nccl"

  // buf[count] (dtype) replaced by its sum over all ranks, in place.
  virtual Status all_reduce_sum(void* buf, int64_t count, DType dtype) = 0;
  // recv[world_size * count] = send[count] of rank 0, then rank 1, ... (rank-major).
  virtual Status all_gather(const void* send, void* recv, int64_t count, DType dtype) = 0;
  // buf[count] of rank `root` copied to every rank (backend memory).
  virtual Status broadcast(void* buf, int64_t count, DType dtype, int root) = 0;
  // bytes of host memory of rank `root` copied to every rank's buf.
  virtual Status broadcast_host(void* buf, int64_t bytes, int root) = 0;
  // The same, for a wait that may be long (a server's ranks between requests): waiting ranks
  // sleep between polls rather than spin on a core. Every rank of one call must use this one.
  virtual Status broadcast_host_waiting(void* buf, int64_t bytes, int root) { return broadcast_host(buf, bytes, root); }
  // Returns when every rank has called it (and, NCCL, this rank's enqueued work is done).
  virtual Status barrier() = 0;
};

// World size 1.
std::unique_ptr<Communicator> make_single_communicator();

// Whether this build has the MPI / NCCL communicators.
bool mpi_built();
bool nccl_built();

// The MPI communicator over MPI_COMM_WORLD; initializes MPI (once per process; the
// communicator's destruction finalizes it). Errors when the build has no MPI.
Result<std::unique_ptr<Communicator>> make_mpi_communicator();
// Whether this process was started by an MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE / PMI_*).
bool started_by_mpi_launcher();

// Where one rank finds its peers (torchrun's variables; flags override them).
struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;           // the GPU index on its host
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};
// RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT from the environment (defaults above
// where unset); errors name a variable that is set but malformed.
Result<RankEnv> rank_env_from_environment();
Status validate(const RankEnv& e);

// The NCCL communicator of rank e.rank: sets device e.local_rank, exchanges the unique id
// over a TCP store at master_addr:master_port (rank 0 listens) and runs collectives on
// `cuda_stream` (a cudaStream_t; the CUDA backend's). Sets NCCL_NVLS_ENABLE=0 first (NVLink
// multicast stays off). Errors when the build has no NCCL.
Result<std::unique_ptr<Communicator>> make_nccl_communicator(const RankEnv& e, void* cuda_stream);

}  // namespace frugal::dist
