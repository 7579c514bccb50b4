// Starting the ranks of one tensor-parallel group on this host (`frugal run|bench offline
// --tensor-parallel-size N`): the verb re-runs its own command line once per rank.
//   CPU ranks: through Open MPI's launcher (`mpirun --oversubscribe -np N <frugal> <args>`), so
//              the ranks find each other through MPI.
//   GPU ranks: N processes with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK = the GPU,
//              MASTER_ADDR, MASTER_PORT), which rendezvous over dist/tcp_store.h for NCCL.
// Either way FRUGAL_TP_SEED (one random seed for every rank's sampler) is set, and only rank 0
// writes the verb's output. A child that is already a rank does not launch again.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "dist/communicator.h"

namespace frugal::dist {

enum class RankKind { kCpuMpi, kGpuNccl };

// Whether this process is one rank of a launched group (an MPI launcher's, or WORLD_SIZE set).
bool is_launched_rank();
// This process's rank in its launched group (OMPI_COMM_WORLD_RANK / PMIX_RANK / RANK), 0 if none.
int launched_rank();

// Several hosts (GPU ranks): `nnodes` hosts start world / nnodes ranks each, host `node_rank`
// the global ranks node_rank x (world / nnodes) + local rank, all meeting at rendezvous's
// MASTER_ADDR:MASTER_PORT (host 0's address).
struct Nodes {
  int nnodes = 1;
  int node_rank = 0;
};
using EnvVars = std::vector<std::pair<std::string, std::string>>;
// The environment of each rank this host starts: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT. Errors name a node count or rank that does not fit world.
Result<std::vector<EnvVars>> local_rank_envs(int world, Nodes nodes, const RankEnv& rendezvous);

// Runs `args` (args[0] ignored: this executable is used) as this host's ranks of a group of
// `world` and waits for them. Returns the exit code: 0, or the first failing rank's (the other
// ranks are then stopped). CPU ranks on several hosts are mpirun's to start (a hostfile): an
// error names that.
Result<int> launch_local_ranks(RankKind kind, int world, const std::vector<std::string>& args, const RankEnv& rendezvous,
                               Nodes nodes = {});

// The sampling seed every rank shares (FRUGAL_TP_SEED, set by launch_local_ranks), or
// `fallback` when unset.
uint64_t shared_seed(uint64_t fallback);

}  // namespace frugal::dist
