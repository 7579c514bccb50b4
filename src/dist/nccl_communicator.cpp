// The NCCL communicator (GPU ranks): device buffers, collectives enqueued on the CUDA backend's
// stream (so a captured step graph replays them). Compiled only in CUDA builds with NCCL.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/tcp_store.h"

namespace frugal::dist {
namespace {

Status nccl_status(ncclResult_t rc, const char* what) {
  if (rc == ncclSuccess) return Status::ok();
  return internal_error(std::string("NCCL ") + what + ": " + ncclGetErrorString(rc));
}

Status cuda_status(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return Status::ok();
  return internal_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(rc));
}

Result<ncclDataType_t> nccl_type(DType t, const char* what) {
  switch (t) {
    case DType::kF32: return ncclFloat32;
    case DType::kF16: return ncclFloat16;
    case DType::kBF16: return ncclBfloat16;
    case DType::kF64: return ncclFloat64;
    case DType::kI32: return ncclInt32;
    case DType::kI64: return ncclInt64;
    case DType::kU8: return ncclUint8;
    default: break;
  }
  return unsupported(std::string(what) + ": NCCL has no type for dtype " + dtype_name(t));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int world, cudaStream_t stream)
      : comm_(comm), rank_(rank), world_(world), stream_(stream) {}
  ~NcclCommunicator() override {
    if (staging_) cudaFree(staging_);
    if (comm_) ncclCommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string name() const override { return "nccl"; }

  Status all_reduce_sum(void* buf, int64_t count, DType dtype) override {
    FRUGAL_ASSIGN_OR_RETURN(ncclDataType_t t, nccl_type(dtype, "all_reduce_sum"));
    if (count < 0) return invalid_argument("all_reduce_sum: negative count");
    return nccl_status(ncclAllReduce(buf, buf, static_cast<size_t>(count), t, ncclSum, comm_, stream_), "all_reduce");
  }
  Status all_gather(const void* send, void* recv, int64_t count, DType dtype) override {
    FRUGAL_ASSIGN_OR_RETURN(ncclDataType_t t, nccl_type(dtype, "all_gather"));
    if (count < 0) return invalid_argument("all_gather: negative count");
    return nccl_status(ncclAllGather(send, recv, static_cast<size_t>(count), t, comm_, stream_), "all_gather");
  }
  Status broadcast(void* buf, int64_t count, DType dtype, int root) override {
    FRUGAL_ASSIGN_OR_RETURN(ncclDataType_t t, nccl_type(dtype, "broadcast"));
    if (count < 0 || root < 0 || root >= world_) return invalid_argument("broadcast: bad count or root");
    return nccl_status(ncclBroadcast(buf, buf, static_cast<size_t>(count), t, root, comm_, stream_), "broadcast");
  }
  // Host data through a device staging buffer, synchronously (control data, not per op).
  Status broadcast_host(void* buf, int64_t bytes, int root) override {
    if (bytes < 0 || root < 0 || root >= world_) return invalid_argument("broadcast_host: bad size or root");
    if (bytes == 0) return Status::ok();
    if (bytes > staging_bytes_) {
      if (staging_) cudaFree(staging_);
      staging_ = nullptr;
      FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMalloc(&staging_, static_cast<size_t>(bytes)), "malloc (broadcast staging)"));
      staging_bytes_ = bytes;
    }
    if (rank_ == root)
      FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(staging_, buf, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_), "memcpy"));
    FRUGAL_RETURN_IF_ERROR(nccl_status(ncclBroadcast(staging_, staging_, static_cast<size_t>(bytes), ncclUint8, root, comm_, stream_), "broadcast"));
    FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(buf, staging_, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_), "memcpy"));
    return cuda_status(cudaStreamSynchronize(stream_), "stream synchronize");
  }
  // An all-reduce of one int, then waiting for the stream: every rank got here.
  Status barrier() override {
    if (!staging_) {
      FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMalloc(&staging_, 256), "malloc (barrier)"));
      staging_bytes_ = 256;
    }
    FRUGAL_RETURN_IF_ERROR(nccl_status(ncclAllReduce(staging_, staging_, 1, ncclInt32, ncclSum, comm_, stream_), "barrier"));
    return cuda_status(cudaStreamSynchronize(stream_), "stream synchronize");
  }

 private:
  ncclComm_t comm_ = nullptr;
  int rank_, world_;
  cudaStream_t stream_;
  void* staging_ = nullptr;
  int64_t staging_bytes_ = 0;
};

}  // namespace

bool nccl_built() { return true; }

Result<std::unique_ptr<Communicator>> make_nccl_communicator(const RankEnv& e, void* cuda_stream) {
  FRUGAL_RETURN_IF_ERROR(validate(e));
  // NVLink multicast (NVLS) stays off: it reserves memory and is not available everywhere.
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);
  int n_dev = 0;
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaGetDeviceCount(&n_dev), "device count"));
  if (e.local_rank >= n_dev)
    return invalid_argument("local rank " + std::to_string(e.local_rank) + " but this host has " + std::to_string(n_dev) +
                            " GPUs");
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaSetDevice(e.local_rank), "set device"));
  ncclUniqueId id{};
  std::vector<uint8_t> blob;
  if (e.rank == 0) {
    FRUGAL_RETURN_IF_ERROR(nccl_status(ncclGetUniqueId(&id), "get unique id"));
    blob.assign(reinterpret_cast<const uint8_t*>(&id), reinterpret_cast<const uint8_t*>(&id) + sizeof id);
  }
  FRUGAL_ASSIGN_OR_RETURN(blob, tcp_store_exchange(e.master_addr, e.master_port, e.rank, e.world_size, blob));
  if (blob.size() != sizeof id) return internal_error("tcp store: the NCCL unique id has the wrong size");
  std::memcpy(&id, blob.data(), sizeof id);
  ncclComm_t comm = nullptr;
  FRUGAL_RETURN_IF_ERROR(nccl_status(ncclCommInitRank(&comm, e.world_size, id, e.rank), "comm init rank"));
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(comm, e.rank, e.world_size, static_cast<cudaStream_t>(cuda_stream)));
}

}  // namespace frugal::dist
