// The rendezvous of GPU ranks (torchrun's idea, reduced to what NCCL needs): rank 0 listens on
// MASTER_ADDR:MASTER_PORT and hands one blob (the NCCL unique id) to each of the other ranks,
// which connect (retrying while rank 0 starts) and read it. Blocking; a deadline bounds it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace frugal::dist {

// Rank 0: serves `blob` to world_size - 1 peers and returns. Other ranks: returns the blob.
// Every rank passes the same address, port and world size; timeout_s bounds the whole exchange.
Result<std::vector<uint8_t>> tcp_store_exchange(const std::string& addr, int port, int rank, int world_size,
                                                const std::vector<uint8_t>& blob, double timeout_s = 120.0);

}  // namespace frugal::dist
