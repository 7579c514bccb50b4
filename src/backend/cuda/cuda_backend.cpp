#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>

#include "backend/cuda/gemm_lt.h"
#include "backend/cuda/graph.h"
#include "backend/cuda/kernels.h"
#include "core/log.h"
#include "ops/weight_format_check.h"

namespace frugal::cuda {
namespace {

constexpr size_t kLtWorkspaceBytes = 32u << 20;
constexpr size_t kStagingBytes = 32u << 20;
constexpr size_t kDirectCopyBytes = 1u << 20;  // below this, staging costs more than it saves

Status cuda_status(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Status::ok();
  return internal_error("cuda " + what + ": " + cudaGetErrorString(e));
}

bool is_float_act(DType t) { return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32; }
int64_t ceil_div_i64(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string dt(DType t) { return dtype_name(t); }

}  // namespace

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(int device) {
  int n_devices = 0;
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaGetDeviceCount(&n_devices), "counting devices"));
  if (device < 0 || device >= n_devices)
    return invalid_argument("cuda device " + std::to_string(device) + " does not exist (" +
                            std::to_string(n_devices) + " found)");
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  b->device_ = device;
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device), "set device"));
  FRUGAL_RETURN_IF_ERROR(cuda_status(
      cudaDeviceGetAttribute(&b->n_sms_, cudaDevAttrMultiProcessorCount, device), "sm count"));
  int smem_optin = 0;
  FRUGAL_RETURN_IF_ERROR(cuda_status(
      cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "shared memory limit"));
  b->max_smem_optin_ = smem_optin > 1024 ? static_cast<size_t>(smem_optin) - 1024 : 0;  // room for static shared memory
  int major = 0;
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cc"));
  b->cc_major_ = major;
  int minor = 0;
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cc"));
  set_prefill_wgmma_device(major, minor);
  const char* pdl_env = std::getenv("FRUGAL_PDL");
  set_pdl_enabled(major >= 9 && !(pdl_env && std::strcmp(pdl_env, "0") == 0));
  const char* fuse_rope_kv_env = std::getenv("FRUGAL_FUSE_ROPE_KV");
  b->fuse_rope_kv_ = !(fuse_rope_kv_env && std::strcmp(fuse_rope_kv_env, "0") == 0);
  const char* fuse_mla_env = std::getenv("FRUGAL_FUSE_MLA_PROLOGUE");
  b->fuse_mla_prologue_ = !(fuse_mla_env && std::strcmp(fuse_mla_env, "0") == 0);
  const char* fuse_mla_uv_env = std::getenv("FRUGAL_FUSE_MLA_UV");
  b->fuse_mla_uv_ = !(fuse_mla_uv_env && std::strcmp(fuse_mla_uv_env, "0") == 0);
  const char* fuse_pro_abs_env = std::getenv("FRUGAL_FUSE_MLA_PRO_ABS");
  b->fuse_mla_pro_abs_ = !(fuse_pro_abs_env && std::strcmp(fuse_pro_abs_env, "0") == 0);
  const char* fuse_split_env = std::getenv("FRUGAL_FUSE_SPLIT");
  b->fuse_split_ = !(fuse_split_env && std::strcmp(fuse_split_env, "0") == 0);
  // Off unless FRUGAL_FUSE_SILU=1: measured no faster at batch 1 on the H200 (2026-12-03, 7B:
  // bf16 236.3 tok/s fused against 237.3 unfused, int4 347.9 against 347.8).
  const char* fuse_silu_env = std::getenv("FRUGAL_FUSE_SILU");
  b->fuse_silu_mul_ = fuse_silu_env && std::strcmp(fuse_silu_env, "1") == 0;
  const char* fuse_norm_env = std::getenv("FRUGAL_FUSE_NORM");
  b->fuse_norm_ = fuse_norm_env && std::strcmp(fuse_norm_env, "1") == 0;
  const char* fuse_route_env = std::getenv("FRUGAL_FUSE_ROUTE");
  b->set_route_mode(fuse_route_env != nullptr ? std::atoi(fuse_route_env) : 0);
  const char* quant_tiles_env = std::getenv("FRUGAL_QUANT_TILES");
  b->quant_tiles_ = !(quant_tiles_env && std::strcmp(quant_tiles_env, "0") == 0);
  const char* fuse_silu_quant_env = std::getenv("FRUGAL_FUSE_SILU_QUANT");
  b->fuse_silu_quant_ = !(fuse_silu_quant_env && std::strcmp(fuse_silu_quant_env, "0") == 0);
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&b->stream_, cudaStreamNonBlocking), "stream"));
  FRUGAL_ASSIGN_OR_RETURN(b->lt_, LtGemm::create(kLtWorkspaceBytes));
  b->graphs_ = std::make_unique<GraphCache>(b.get());
  FRUGAL_RETURN_IF_ERROR(cuda_status(prepare_attention_decode(), "decode attention setup"));
  FRUGAL_RETURN_IF_ERROR(cuda_status(prepare_mla_decode(), "MLA attention setup"));
  // Where the limit cannot be raised the persistent MLA kernel never applies (its plans say so).
  if (prepare_mla_attention(b->max_smem_optin_) != cudaSuccess) (void)cudaGetLastError();
  // The decode kernels' split counters start at zero and are left at zero by every launch.
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMalloc(&b->decode_counters_, kDecodeCounters * sizeof(uint32_t)), "counters alloc"));
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMemset(b->decode_counters_, 0, kDecodeCounters * sizeof(uint32_t)), "counters zero"));
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMalloc(&b->route_counter_, sizeof(uint32_t)), "route counter alloc"));
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMemset(b->route_counter_, 0, sizeof(uint32_t)), "route counter zero"));
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMalloc(&b->grid_sync_, sizeof(unsigned long long)), "grid barrier alloc"));
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMemset(b->grid_sync_, 0, sizeof(unsigned long long)), "grid barrier zero"));
  if (const char* e = std::getenv("FRUGAL_MLA_ATTN_STAMPS"); e != nullptr && std::atoi(e) > 0) {
    FRUGAL_RETURN_IF_ERROR(b->set_mla_attention_stamps(std::atoi(e)));
    b->mla_stamps_report_ = true;
  }
  FRUGAL_RETURN_IF_ERROR(cuda_status(prepare_quant_gemm(), "quantized GEMM setup"));
  FRUGAL_RETURN_IF_ERROR(cuda_status(prepare_moe_experts(), "MoE expert GEMM setup"));
  return b;
}

CudaBackend::~CudaBackend() {
  if (stream_) cudaStreamSynchronize(stream_);
  if (mla_stamps_report_) {
    auto st = mla_attention_stamps();
    if (st.is_ok()) {
      const MlaAttnStampSummary m = summarize_mla_attention_stamps(st->data(), mla_stamp_slots_, n_sms_);
      std::fprintf(stderr,
                   "mla_attention stamps: %d launches of %d blocks (medians in us; timer step %.0f ns)\n"
                   "  block starts spread %.2f, PDL wait %.2f, after the wait %.2f\n",
                   m.launches, n_sms_, m.tick_ns, m.start_spread, m.wait, m.after_wait);
      for (int k = 0; k < 5; ++k) {
        std::fprintf(stderr, "  step %d %.2f (arrivals spread %.2f)", k + 1, m.step[k], m.spread[k]);
        if (k < 4) std::fprintf(stderr, ", barrier %d %.2f", k + 1, m.barrier[k]);
        std::fprintf(stderr, "\n");
      }
    } else {
      std::fprintf(stderr, "mla_attention stamps: %s\n", st.status().to_string().c_str());
    }
  }
  if (mla_stamps_) cudaFree(mla_stamps_);
  for (unsigned long long* r : retired_mla_stamps_) cudaFree(r);
  graphs_.reset();
  lt_.reset();
  if (scratch_) cudaFree(scratch_);
  if (decode_counters_) cudaFree(decode_counters_);
  if (route_counter_) cudaFree(route_counter_);
  if (grid_sync_) cudaFree(grid_sync_);
  for (int i = 0; i < kStaging; ++i) {
    if (staging_[i]) cudaFreeHost(staging_[i]);
    if (staging_done_[i]) cudaEventDestroy(staging_done_[i]);
  }
  if (stream_) cudaStreamDestroy(stream_);
}

Status CudaBackend::check_launch(cudaError_t e, const char* op) {
  if (e == cudaSuccess) return Status::ok();
  return internal_error(std::string("cuda ") + op + " launch: " + cudaGetErrorString(e));
}

Result<void*> CudaBackend::alloc(size_t nbytes) {
  if (capturing_) return internal_error("cuda alloc during graph capture");
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, nbytes == 0 ? 1 : nbytes);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls still work
    return resource_exhausted("cuda alloc of " + std::to_string(nbytes) + " bytes: " + cudaGetErrorString(e));
  }
  return p;
}

void CudaBackend::free(void* ptr) {
  if (ptr) cudaFree(ptr);
}

Result<void*> CudaBackend::alloc_pinned(size_t nbytes) {
  void* p = nullptr;
  cudaError_t e = cudaMallocHost(&p, nbytes == 0 ? 1 : nbytes);
  if (e != cudaSuccess) return resource_exhausted("pinned host alloc of " + std::to_string(nbytes) + " bytes");
  return p;
}

void CudaBackend::free_pinned(void* ptr) {
  if (ptr) cudaFreeHost(ptr);
}

// Pageable memory cannot be copied asynchronously; copying through two pinned buffers lets
// the host memcpy of chunk i+1 overlap the DMA of chunk i (weights load at PCIe speed).
Status CudaBackend::upload(void* dst, const void* src, size_t nbytes) {
  if (nbytes < kDirectCopyBytes) {
    FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, stream_), "upload"));
    return cuda_status(cudaStreamSynchronize(stream_), "upload sync");
  }
  if (staging_bytes_ == 0) {
    for (int i = 0; i < kStaging; ++i) {
      FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMallocHost(&staging_[i], kStagingBytes), "pinned staging"));
      FRUGAL_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&staging_done_[i], cudaEventDisableTiming), "event"));
    }
    staging_bytes_ = kStagingBytes;
  }
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  for (size_t off = 0, i = 0; off < nbytes; off += staging_bytes_, i ^= 1) {
    size_t n = nbytes - off < staging_bytes_ ? nbytes - off : staging_bytes_;
    FRUGAL_RETURN_IF_ERROR(cuda_status(cudaEventSynchronize(staging_done_[i]), "staging wait"));
    std::memcpy(staging_[i], s + off, n);
    FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(d + off, staging_[i], n, cudaMemcpyHostToDevice, stream_), "upload"));
    FRUGAL_RETURN_IF_ERROR(cuda_status(cudaEventRecord(staging_done_[i], stream_), "staging record"));
  }
  return cuda_status(cudaStreamSynchronize(stream_), "upload sync");
}

Status CudaBackend::download(void* dst, const void* src, size_t nbytes) {
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, stream_), "download"));
  return cuda_status(cudaStreamSynchronize(stream_), "download sync");
}

Status CudaBackend::memset_zero(void* dst, size_t nbytes) {
  return cuda_status(cudaMemsetAsync(dst, 0, nbytes, stream_), "memset");
}

Status CudaBackend::device_memory(size_t* free_bytes, size_t* total_bytes) {
  return cuda_status(cudaMemGetInfo(free_bytes, total_bytes), "memory info");
}

Status CudaBackend::synchronize() { return cuda_status(cudaStreamSynchronize(stream_), "synchronize"); }

Result<ops::WeightFormat> CudaBackend::prepare_weight(const ops::WeightView& w, int64_t n, int64_t k) {
  if (!quant_tiles_ || !w.data || !ops::tiles8_fits(w.format, n, k)) return w.format;
  const int64_t row_bytes = ops::weight_row_bytes(w.format, k), tile = 8 * row_bytes, total = n * row_bytes;
  // The codes pass through a temporary buffer in slices of whole tiles (at most 64 MiB).
  const int64_t tmp_bytes = std::max(tile, std::min(total, int64_t{64} << 20) / tile * tile);
  void* tmp = nullptr;
  if (cudaMalloc(&tmp, static_cast<size_t>(tmp_bytes)) != cudaSuccess) {
    (void)cudaGetLastError();
    return w.format;  // no room for the slice: the weight stays row-major, which every kernel reads
  }
  const cudaError_t e = launch_quant_tiles8_relayout(const_cast<void*>(w.data), n, row_bytes, tmp,
                                                    static_cast<size_t>(tmp_bytes), stream_);
  const cudaError_t s = cudaStreamSynchronize(stream_);
  cudaFree(tmp);
  FRUGAL_RETURN_IF_ERROR(cuda_status(e != cudaSuccess ? e : s, "tiles8 re-layout"));
  ops::WeightFormat f = w.format;
  f.layout = ops::WeightLayout::kOutInTiles8;
  return f;
}

Status CudaBackend::reserve_scratch(size_t nbytes) {
  if (nbytes <= scratch_bytes_) return Status::ok();
  if (capturing_) return internal_error("cuda scratch must grow to " + std::to_string(nbytes) +
                                        " bytes during a graph capture; reserve_scratch before capturing");
  FRUGAL_RETURN_IF_ERROR(synchronize());  // the old scratch may still be read by queued work
  // Captured graphs point at the old scratch: drop them (their owners recapture).
  if (graphs_ && graphs_->size() > 0) {
    graphs_->clear();
    graph_bytes_ = 0;
  }
  if (scratch_) cudaFree(scratch_);
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMalloc(&scratch_, nbytes), "scratch alloc"));
  scratch_bytes_ = nbytes;
  return Status::ok();
}

Result<void*> CudaBackend::scratch(size_t nbytes) {
  FRUGAL_RETURN_IF_ERROR(reserve_scratch(nbytes));
  return scratch_;
}

Status CudaBackend::embedding(const ops::EmbeddingParams& p) {
  if (!is_float_act(p.table_dtype) || !is_float_act(p.out_dtype))
    return unsupported("cuda embedding: table " + dt(p.table_dtype) + " -> " + dt(p.out_dtype));
  return check_launch(launch_embedding(p, stream_), "embedding");
}

Status CudaBackend::rms_norm(const ops::RmsNormParams& p) {
  if (!is_float_act(p.act_dtype) || !is_float_act(p.weight_dtype))
    return unsupported("cuda rms_norm: act " + dt(p.act_dtype) + ", weight " + dt(p.weight_dtype));
  return check_launch(launch_rms_norm(p, stream_), "rms_norm");
}

// GEMV for decode-sized m (bandwidth-bound, ours), cuBLASLt above, a generic kernel for what
// neither takes (odd k, exotic dtypes). For m = 2..kGemvMaxM the faster of GEMV and cuBLASLt
// is measured on the first call of each shape outside a capture (FRUGAL_SMALL_M=gemv|lt
// forces one), so every later call of that shape, and every graph, uses the same kernel.
// The weight format is dispatched here, once per call: every scheme is listed, and a format
// without CUDA kernels is refused by name (ops::check_weight_view refuses unknown ones).
namespace {
Status check_matmul(const ops::MatmulParams& p) {
  if (!is_float_act(p.x_dtype) || !is_float_act(p.y_dtype) || (p.bias && !is_float_act(p.bias_dtype)))
    return unsupported("cuda matmul: x " + dt(p.x_dtype) + ", y " + dt(p.y_dtype) +
                       (p.bias ? ", bias " + dt(p.bias_dtype) : std::string()));
  if (p.m == 0 || p.n == 0) return Status::ok();
  return ops::check_weight_view(p.w, "cuda matmul");
}
}  // namespace

Status CudaBackend::matmul(const ops::MatmulParams& p) {
  FRUGAL_RETURN_IF_ERROR(check_matmul(p));
  if (p.m == 0 || p.n == 0) return Status::ok();
  switch (p.w.format.scheme) {
    case ops::WeightScheme::kDense: return matmul_dense(p);
    case ops::WeightScheme::kInt8: case ops::WeightScheme::kInt4: case ops::WeightScheme::kNf4:
    case ops::WeightScheme::kFp8:
      return matmul_quant(p);
  }
  return unsupported("cuda matmul: no kernels for weight format '" + ops::weight_format_name(p.w.format) + "'");
}

// Quantized weights: the tensor-core GEMV below quant_gemm_min_m() tokens (9 with the slab GEMM,
// the default, and the pipelined one; 33 with the one-quad one) and the tensor-core GEMM from there to kQuantGemvMaxM (one pass
// over the codes; quant_gemv_or_gemm); above kFp8GemvMaxM, FP8 weights with per-tensor, per-channel or 128 x
// 128 block scales run W8A8 (activations quantized to FP8, cuBLASLt's FP8 GEMM; sm_90); other
// formats (or where that is unsupported) are dequantized to bf16 in the scratch and multiplied
// by cuBLASLt, when the scratch is large enough (it cannot grow inside a capture); else the
// per-element correctness kernel. FRUGAL_QUANT_PATH=gemv|w8a8|lt|ref forces one where it
// applies (benchmarks, tests).
namespace {
bool quant_path_forced(const char* path) {
  static const char* force = std::getenv("FRUGAL_QUANT_PATH");
  return force && std::strcmp(force, path) == 0;
}
}  // namespace

void CudaBackend::set_fp8_fast_accum(bool on) { lt_->set_fp8_fast_accum(on); }

bool CudaBackend::quant_gemv_ok(const ops::MatmulParams& p) const {
  return !quant_path_forced("ref") && !quant_path_forced("lt") && !quant_path_forced("w8a8") && quant_gemv_supported(p);
}

// FP8 weights leave the GEMV for W8A8 above kFp8GemvMaxM tokens (where cuBLASLt takes them).
int64_t CudaBackend::quant_gemv_max_m(const ops::MatmulParams& p) const {
  return p.w.format.scheme != ops::WeightScheme::kFp8 ? kQuantGemvMaxM : fp8_gemv_max_m_ >= 0 ? fp8_gemv_max_m_ : kFp8GemvMaxM;
}

// Whether matmul_quant would try W8A8 for p first (FP8 weights past the weight-only GEMV's
// tokens, no other path forced): where a fused op may fold its step into the activation quantization.
bool CudaBackend::matmul_goes_w8a8(const ops::MatmulParams& p) const {
  return p.w.format.scheme == ops::WeightScheme::kFp8 && p.m > quant_gemv_max_m(p) && !quant_path_forced("ref") &&
         !quant_path_forced("lt") && !quant_path_forced("gemv");
}

bool CudaBackend::quant_gemv_first(const ops::MatmulParams& p) const {
  return quant_gemv_ok(p) && (p.m <= quant_gemv_max_m(p) || quant_path_forced("gemv"));
}

Status CudaBackend::matmul_quant(const ops::MatmulParams& p) {
  const bool want_ref = quant_path_forced("ref"), want_lt = quant_path_forced("lt"), want_w8a8 = quant_path_forced("w8a8");
  const bool gemv_ok = quant_gemv_ok(p);
  const int64_t gemv_max_m = quant_gemv_max_m(p);
  if (gemv_ok && (p.m <= gemv_max_m || quant_path_forced("gemv"))) return quant_gemv_or_gemm(p);  // quant_gemv_first
  if (!want_ref && !want_lt && (p.m > gemv_max_m || want_w8a8)) {
    Status st = matmul_w8a8(p);
    if (st.code() != ErrorCode::kUnsupported) return st;
    // Not an FP8 weight W8A8 takes ("w8a8: ..."), or cuBLASLt refused it: said once.
    if (st.message().rfind("w8a8: ", 0) != 0) {
      if (w8a8_fallback_.empty())
        FRUGAL_LOG_WARN("fp8 W8A8 unavailable ({}): {} instead", st.message(),
                        gemv_ok && p.m <= kQuantGemvMaxM ? "the weight-only GEMV" : "dequantizing to bf16");
      w8a8_fallback_ = st.message();
    }
  }
  // FP8 weights W8A8 does not take: the GEMV still beats dequantizing up to kQuantGemvMaxM.
  if (gemv_ok && p.m <= kQuantGemvMaxM) return quant_gemv_or_gemm(p);
  if (!want_ref && p.x_dtype == DType::kBF16) {
    Status st = matmul_dequant_lt(p);
    if (st.code() != ErrorCode::kUnsupported) return st;
    // No slice fits (a capture before anything grew the scratch) or cuBLASLt refused: the GEMV
    // in passes of 64 tokens still reads the codes, far faster than the per-element kernel.
    if (gemv_ok) return check_launch(launch_quant_gemv(p, stream_, nullptr, quant_gemv_kernel_), "quant_gemv");
  }
  return check_launch(launch_matmul_quant(p, stream_), "matmul_quant");
}

Status CudaBackend::matmul_dequant_lt(const ops::MatmulParams& p) {
  const size_t row = static_cast<size_t>(p.k) * 2, whole = static_cast<size_t>(p.n) * row;
  // What the slices may use: the whole weight, or the scratch as it is in a capture (it cannot
  // grow there), at most dequant_scratch_max_.
  const size_t cap = std::min(capturing_ ? scratch_bytes_ : whole, dequant_scratch_max_);
  // Slices start on scale rows (fp8 128-row blocks) and on 16 rows (cuBLASLt's aligned outputs).
  const int64_t step = std::lcm<int64_t>(16, ops::weight_row_step(p.w.format));
  int64_t rows = static_cast<int64_t>(cap / row);
  if (rows < p.n) rows = rows / step * step;
  rows = std::min<int64_t>(rows, p.n);
  if (rows <= 0) return unsupported("dequant: the scratch holds no slice of " + std::to_string(step) + " rows");
  ops::MatmulParams q = p;
  q.n = rows;
  q.w = ops::dense_weight(nullptr, DType::kBF16);
  ops::MatmulParams probe = q;  // run_lt adds a bias of another dtype than y itself
  if (probe.bias && probe.bias_dtype != probe.y_dtype) probe.bias = nullptr;
  if (!LtGemm::supports(probe)) return unsupported("dequant: cuBLASLt takes no " + std::to_string(p.m) + " x " +
                                                   std::to_string(rows) + " x " + std::to_string(p.k) + " bf16 GEMM");
  Result<void*> w = scratch(static_cast<size_t>(rows) * row);
  if (!w) {
    (void)cudaGetLastError();  // the failed allocation; the device is usable
    return unsupported("dequant: " + w.status().message());
  }
  for (int64_t n0 = 0; n0 < p.n; n0 += rows) {
    const int64_t nc = std::min<int64_t>(rows, p.n - n0);
    FRUGAL_RETURN_IF_ERROR(
        check_launch(launch_dequant_bf16(ops::weight_rows_from(p.w, n0, p.k), nc, p.k, *w, stream_), "dequant_bf16"));
    q.w = ops::dense_weight(*w, DType::kBF16);
    q.n = nc;
    q.y = static_cast<uint8_t*>(p.y) + dtype_bytes(p.y_dtype, n0);
    q.bias = p.bias ? static_cast<const uint8_t*>(p.bias) + dtype_bytes(p.bias_dtype, n0) : nullptr;
    FRUGAL_RETURN_IF_ERROR(run_lt(q));
  }
  return Status::ok();
}

// Decode-sized m: the GEMV up to quant_gemm_min_m() - 1 tokens, the GEMM (x staged once per
// block and shared by its row tiles) from there, with k split over blocks when the rows alone
// do not fill the GPU. Its partials live in the scratch, grown by the eager step before a
// capture; a capture that finds it too small runs one split (one block per tile).
void CudaBackend::set_quant_gemm(QuantGemmKernel kernel, int min_m) {
  quant_gemm_kernel_ = kernel;
  quant_gemm_min_m_ = min_m;
  if (kernel == QuantGemmKernel::kSlab) (void)prepare_quant_gemm_slab();
}

Status CudaBackend::quant_gemv_or_gemm(const ops::MatmulParams& p) {
  if (p.m < quant_gemm_min_m(quant_gemm_kernel_, quant_gemm_min_m_))
    return check_launch(launch_quant_gemv(p, stream_, nullptr, quant_gemv_kernel_), "quant_gemv");
  int splits = quant_gemm_splits(p, n_sms_, quant_gemm_kernel_);
  void* partials = nullptr;
  if (const size_t bytes = quant_gemm_scratch_bytes(p, splits, quant_gemm_kernel_); bytes > 0) {
    if (capturing_ && bytes > scratch_bytes_) {
      splits = 1;
    } else {
      FRUGAL_ASSIGN_OR_RETURN(partials, scratch(bytes));
    }
  }
  return check_launch(launch_quant_gemm(p, splits, partials, stream_, quant_gemm_kernel_), "quant_gemm");
}

Result<const float*> CudaBackend::matmul_to_partials(const ops::MatmulParams& p, int* splits) {
  *splits = 1;
  if (!fuse_split_ || p.m == 0 || p.n == 0 || p.w.format.scheme == ops::WeightScheme::kDense) return nullptr;
  if (!quant_gemv_first(p) || p.m < quant_gemm_min_m(quant_gemm_kernel_, quant_gemm_min_m_) ||
      !quant_gemm_partials_ok(p, quant_gemm_kernel_))
    return nullptr;
  const int s = quant_gemm_splits(p, n_sms_, quant_gemm_kernel_);
  if (s < 2) return nullptr;
  const size_t bytes = quant_gemm_scratch_bytes(p, s, quant_gemm_kernel_);
  if (capturing_ && bytes > scratch_bytes_) return nullptr;  // the sequence runs one slice
  FRUGAL_ASSIGN_OR_RETURN(void* partials, scratch(bytes));
  FRUGAL_RETURN_IF_ERROR(check_launch(launch_quant_gemm_partials(p, s, partials, stream_, quant_gemm_kernel_), "quant_gemm"));
  *splits = s;
  return static_cast<const float*>(partials);
}

Result<bool> CudaBackend::split_epilogue(const ops::MatmulParams& mm, const char* what,
                                         const std::function<cudaError_t(const float*, int)>& launch) {
  FRUGAL_RETURN_IF_ERROR(check_matmul(mm));
  int splits = 1;
  FRUGAL_ASSIGN_OR_RETURN(const float* partials, matmul_to_partials(mm, &splits));
  if (partials == nullptr) return false;
  FRUGAL_RETURN_IF_ERROR(check_launch(launch(partials, splits), what));
  ++fused_split_calls_;
  return true;
}

// FP8 weights x FP8 activations (W8A8). The weight's scales decide the activation scales:
// per-tensor / per-channel weights take one scale per token (the per-tensor scale spread over
// the rows), DeepSeek-V3's 128 x 128 blocks one per token and 128 inputs. x is quantized into the
// scratch (codes, then scales, then the weight's scales when they need a copy); kUnsupported
// for every other case, which takes the dequantizing path.
Status CudaBackend::matmul_w8a8(const ops::MatmulParams& p, const ops::SiluMulParams* silu,
                                const ops::RmsNormParams* norm) {
  static const bool off = [] {
    const char* e = std::getenv("FRUGAL_FP8_W8A8");
    return e && std::strcmp(e, "0") == 0;
  }();
  const ops::WeightFormat& f = p.w.format;
  if (off || cc_major_ != 9 || f.scheme != ops::WeightScheme::kFp8 || f.act_order || f.zero != ops::ZeroPoint::kNone)
    return unsupported("w8a8: not an fp8 weight on sm_90");
  if (p.y_dtype != DType::kBF16 || !is_float_act(p.x_dtype)) return unsupported("w8a8: y must be bf16");
  const bool row = f.group_k == 0 && (f.group_n == 0 || f.group_n == 1);
  const bool block = f.group_k == 128 && f.group_n == 128;
  if (!row && !block) return unsupported("w8a8: scale blocks other than per-tensor, per-channel or 128 x 128");
  // cuBLASLt's FP8 kernels want 16-byte aligned output rows (no algorithm otherwise).
  const auto addr = [](const void* q) { return reinterpret_cast<uintptr_t>(q); };
  if (p.ld_y % 8 != 0 || addr(p.y) % 16 != 0 || addr(p.w.data) % 16 != 0)
    return unsupported("w8a8: output rows or codes not 16-byte aligned");
  // Nor output widths that are not a multiple of 16 (measured as above; real layers are).
  if (p.n % 16 != 0) return unsupported("w8a8: n is not a multiple of 16");
  // Nor token counts that are not a multiple of 4 (measured on sm_90, cuBLASLt 13.1): the last
  // 1-3 tokens take the weight-only GEMV.
  if (p.m % 4 != 0 && p.m > 4) {
    const int64_t m4 = p.m / 4 * 4;
    ops::MatmulParams head = p, tail = p;
    head.m = m4;
    tail.m = p.m - m4;
    tail.x = static_cast<const char*>(p.x) + dtype_bytes(p.x_dtype, m4 * p.ld_x);
    tail.y = static_cast<char*>(p.y) + dtype_bytes(p.y_dtype, m4 * p.ld_y);
    ops::RmsNormParams head_norm{}, tail_norm{};
    if (norm) {
      head_norm = tail_norm = *norm;
      head_norm.rows = m4;
      tail_norm.rows = p.m - m4;
      tail_norm.x = static_cast<const char*>(norm->x) + dtype_bytes(norm->act_dtype, m4 * norm->ld_x);
      tail_norm.y = static_cast<char*>(norm->y) + dtype_bytes(norm->act_dtype, m4 * norm->ld_y);
    }
    FRUGAL_RETURN_IF_ERROR(matmul_w8a8(head, silu, norm ? &head_norm : nullptr));
    if (norm) FRUGAL_RETURN_IF_ERROR(rms_norm(tail_norm));  // the tail's normalized rows, for the GEMV
    if (silu) {  // the tail's product rows, for the GEMV
      ops::SiluMulParams t = *silu;
      t.gate = static_cast<const char*>(t.gate) + dtype_bytes(t.act_dtype, m4 * t.ld_gate);
      t.up = static_cast<const char*>(t.up) + dtype_bytes(t.act_dtype, m4 * t.ld_up);
      t.out = static_cast<char*>(t.out) + dtype_bytes(t.act_dtype, m4 * t.ld_out);
      t.n_tokens = tail.m;
      FRUGAL_RETURN_IF_ERROR(check_launch(launch_silu_mul(t, stream_), "silu_mul"));
    }
    return matmul_quant(tail);
  }
  const int64_t k_pad = ops::weight_k_pad(f, p.k), kb = ceil_div_i64(k_pad, 128), nb = ceil_div_i64(p.n, 128);
  const int64_t ld_sx = block ? (p.m + 3) / 4 * 4 : p.m, ld_sw = block ? (kb + 3) / 4 * 4 : 1;
  const bool copy_sw = block ? ld_sw != kb : f.group_n == 0;
  auto align = [](size_t b) { return (b + 255) / 256 * 256; };
  const size_t xq_bytes = align(static_cast<size_t>(p.m * k_pad));
  const size_t sx_bytes = align(static_cast<size_t>((block ? kb * ld_sx : p.m) * 4));
  const size_t sw_bytes = copy_sw ? align(static_cast<size_t>((block ? nb * ld_sw : p.n) * 4)) : 0;
  const size_t bytes = xq_bytes + sx_bytes + sw_bytes;
  if (capturing_ && bytes > scratch_bytes_) return unsupported("w8a8: scratch too small inside a capture");
  FRUGAL_ASSIGN_OR_RETURN(void* buf, scratch(bytes));
  auto* xq = static_cast<uint8_t*>(buf);
  auto* sx = reinterpret_cast<float*>(xq + xq_bytes);
  auto* sw = copy_sw ? reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(sx) + sx_bytes) : nullptr;
  if (silu) {
    const FusedSiluQuant f{.gate = silu->gate, .up = silu->up, .ld_gate = silu->ld_gate, .ld_up = silu->ld_up};
    const cudaError_t e = launch_quantize_fp8_silu(f, p.m, p.k, k_pad, block, xq, sx, ld_sx, stream_);
    if (e == cudaErrorNotSupported) return unsupported("w8a8: silu_mul cannot be fused into this quantization");
    FRUGAL_RETURN_IF_ERROR(check_launch(e, "quantize_fp8_silu"));
  } else if (norm) {
    const cudaError_t e = launch_quantize_fp8_norm(*norm, k_pad, block, xq, sx, ld_sx, stream_);
    if (e == cudaErrorNotSupported) return unsupported("w8a8: rms_norm cannot be fused into this quantization");
    FRUGAL_RETURN_IF_ERROR(check_launch(e, "quantize_fp8_norm"));
  } else {
    FRUGAL_RETURN_IF_ERROR(check_launch(
        launch_quantize_fp8_act(p.x, p.x_dtype, p.ld_x, p.m, p.k, k_pad, block, xq, sx, ld_sx, stream_), "quantize_fp8"));
  }
  if (copy_sw)
    FRUGAL_RETURN_IF_ERROR(check_launch(launch_fp8_weight_scales(static_cast<const float*>(p.w.scales), block ? nb : p.n,
                                                                 block ? kb : 1, block ? ld_sw : 1, !block, sw, stream_),
                                        "fp8_weight_scales"));
  const bool fused_bias = p.bias && p.bias_dtype == DType::kBF16;
  Fp8Gemm g{.m = p.m, .n = p.n, .k = k_pad, .w = p.w.data, .ld_w = ops::weight_row_bytes(f, p.k), .x = xq,
            .ld_x = k_pad, .sw = copy_sw ? sw : static_cast<const float*>(p.w.scales), .sx = sx,
            .scales = block ? Fp8Gemm::Scales::kBlock128 : Fp8Gemm::Scales::kRow, .y = p.y, .ld_y = p.ld_y,
            .bias = fused_bias ? p.bias : nullptr, .accumulate = p.accumulate};
  FRUGAL_RETURN_IF_ERROR(lt_->run_fp8(g, stream_));
  ++w8a8_calls_;
  if (!p.bias || fused_bias) return Status::ok();
  return check_launch(launch_bias_add(p.y, p.y_dtype, p.ld_y, p.bias, p.bias_dtype, p.m, p.n, stream_), "bias_add");
}

Result<bool> CudaBackend::dense_takes_gemv(const ops::MatmulParams& p) {
  if (!gemv_supported(p)) return false;
  if (p.m < 2) return true;
  FRUGAL_ASSIGN_OR_RETURN(const bool use_lt, small_m_prefers_lt(p));
  return !use_lt;
}

// Dense f32 / f16 / bf16 weights (check_weight_view checked the dtype).
Status CudaBackend::matmul_dense(const ops::MatmulParams& p) {
  FRUGAL_ASSIGN_OR_RETURN(const bool gemv, dense_takes_gemv(p));
  if (gemv) return check_launch(launch_gemv(p, stream_), "gemv");
  Status st = run_lt(p);
  if (st.code() != ErrorCode::kUnsupported) return st;
  return check_launch(launch_matmul_generic(p, stream_), "matmul_generic");
}

Status CudaBackend::run_lt(const ops::MatmulParams& p) {
  ops::MatmulParams q = p;
  const bool separate_bias = p.bias && p.bias_dtype != p.y_dtype;
  if (separate_bias) q.bias = nullptr;
  if (p.k <= 0 || !LtGemm::supports(q)) return unsupported("cuBLASLt: shape");
  FRUGAL_RETURN_IF_ERROR(lt_->run(q, stream_));
  if (!separate_bias) return Status::ok();
  return check_launch(launch_bias_add(p.y, p.y_dtype, p.ld_y, p.bias, p.bias_dtype, p.m, p.n, stream_), "bias_add");
}

Result<bool> CudaBackend::small_m_prefers_lt(const ops::MatmulParams& p) {
  static const char* force = std::getenv("FRUGAL_SMALL_M");
  if (force && std::strcmp(force, "gemv") == 0) return false;
  ops::MatmulParams probe = p;
  probe.bias = p.bias && p.bias_dtype != p.y_dtype ? nullptr : p.bias;
  if (p.k <= 0 || !LtGemm::supports(probe)) return false;
  if (force && std::strcmp(force, "lt") == 0) return true;
  const SmallMKey key{p.m, p.n, p.k, p.ld_x, p.ld_y, static_cast<int>(p.y_dtype), p.bias != nullptr, p.accumulate};
  if (auto it = small_m_choice_.find(key); it != small_m_choice_.end()) return it->second;
  if (capturing_) return false;  // not measured before the capture: keep the GEMV
  // Time both on a scratch output (the real y may be accumulated into).
  const size_t y_bytes = static_cast<size_t>(dtype_bytes(p.y_dtype, (p.m - 1) * p.ld_y + p.n));
  void* y = nullptr;
  if (cudaMalloc(&y, y_bytes) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  ops::MatmulParams q = p;
  q.y = y;
  q.accumulate = false;
  cudaEvent_t ev[3];
  for (auto& e : ev) cudaEventCreate(&e);
  constexpr int kReps = 5;
  float ms_gemv = 0, ms_lt = 0;
  Status st = Status::ok();
  for (int pass = 0; pass < 2 && st.is_ok(); ++pass) {  // pass 0 warms up both
    cudaEventRecord(ev[0], stream_);
    for (int r = 0; r < kReps && st.is_ok(); ++r) st = check_launch(launch_gemv(q, stream_), "gemv");
    cudaEventRecord(ev[1], stream_);
    for (int r = 0; r < kReps && st.is_ok(); ++r) st = run_lt(q);
    cudaEventRecord(ev[2], stream_);
    cudaEventSynchronize(ev[2]);
    cudaEventElapsedTime(&ms_gemv, ev[0], ev[1]);
    cudaEventElapsedTime(&ms_lt, ev[1], ev[2]);
  }
  for (auto& e : ev) cudaEventDestroy(e);
  cudaFree(y);
  FRUGAL_RETURN_IF_ERROR(st);
  const bool lt = ms_lt < ms_gemv;
  small_m_choice_.emplace(key, lt);
  FRUGAL_LOG_DEBUG("cuda matmul m={} n={} k={}: gemv {:.1f} us, cuBLASLt {:.1f} us -> {}", p.m, p.n, p.k,
                   1000.0 * ms_gemv / kReps, 1000.0 * ms_lt / kReps, lt ? "cuBLASLt" : "gemv");
  return lt;
}

namespace {

Status check_rope(const ops::RopeParams& p) {
  if (!is_float_act(p.act_dtype)) return unsupported("cuda rope: act " + dt(p.act_dtype));
  if (p.rotary_dim % 2 != 0 || p.rotary_dim > p.head_dim)
    return invalid_argument("cuda rope: rotary_dim " + std::to_string(p.rotary_dim) + " must be even and <= head_dim");
  return Status::ok();
}

Status check_kv_write(const ops::KvWriteParams& p) {
  const DType ct = p.cache.cache_dtype;
  const bool quant = ct == DType::kF8E4M3 || ct == DType::kI8;
  if (!is_float_act(p.act_dtype) || (!quant && !is_float_act(ct)))
    return unsupported("cuda kv_write: act " + dt(p.act_dtype) + ", cache " + dt(ct));
  if (ct == DType::kI8 && (p.cache.k_scales == nullptr || p.cache.v_scales == nullptr))
    return invalid_argument("cuda kv_write: int8 KV cache without its k_scales / v_scales tensors");
  if (ct == DType::kF8E4M3 && !(p.cache.k_scale > 0.f && p.cache.v_scale > 0.f))
    return invalid_argument("cuda kv_write: fp8 KV cache scales must be > 0 (k_scale " + std::to_string(p.cache.k_scale) +
                            ", v_scale " + std::to_string(p.cache.v_scale) + ")");
  return Status::ok();
}

}  // namespace

Status CudaBackend::rope(const ops::RopeParams& p) {
  FRUGAL_RETURN_IF_ERROR(check_rope(p));
  return check_launch(launch_rope(p, stream_), "rope");
}

// One kernel for the model's layout (rope_kv_write_fusable), unless FRUGAL_FUSE_ROPE_KV=0 or
// set_fuse_rope_kv(false); else rope then kv_write. Both give the same bits.
Status CudaBackend::rope_kv_write(const ops::RopeKvWriteParams& p) {
  if (!fuse_rope_kv_ || !rope_kv_write_fusable(p)) return ops::Backend::rope_kv_write(p);  // the sequence
  FRUGAL_RETURN_IF_ERROR(check_rope(p.rope));
  FRUGAL_RETURN_IF_ERROR(check_kv_write(p.kv));
  FRUGAL_RETURN_IF_ERROR(check_launch(launch_rope_kv_write(p, stream_), "rope_kv_write"));
  ++fused_rope_kv_calls_;
  return Status::ok();
}

// One kernel for DeepSeek's layout (mla_kv_prologue_fusable), unless FRUGAL_FUSE_MLA_PROLOGUE=0
// or set_fuse_mla_prologue(false); else rms_norm, rope, kv_write. Both give the same bits.
Status CudaBackend::mla_kv_prologue(const ops::MlaKvPrologueParams& p) {
  if (!fuse_mla_prologue_ || !mla_kv_prologue_fusable(p)) return ops::Backend::mla_kv_prologue(p);  // the sequence
  FRUGAL_RETURN_IF_ERROR(check_rope(p.rope));
  FRUGAL_RETURN_IF_ERROR(check_kv_write(p.kv));
  FRUGAL_RETURN_IF_ERROR(check_launch(launch_mla_kv_prologue(p, stream_), "mla_kv_prologue"));
  ++fused_mla_prologue_calls_;
  return Status::ok();
}

Status CudaBackend::kv_write(const ops::KvWriteParams& p) {
  FRUGAL_RETURN_IF_ERROR(check_kv_write(p));
  return check_launch(launch_kv_write(p, stream_), "kv_write");
}

// MLA's attention and W_UV: the split merge and the per-head matmul in one kernel
// (mla_combine_uv_fusable), unless FRUGAL_FUSE_MLA_UV=0; else the two ops.
Status CudaBackend::attention_batched_matmul(const ops::AttentionBatchedMatmulParams& f) {
  const ops::AttentionParams& p = f.attn;
  if (fuse_mla_uv_ && p.sink_tokens == 0 && p.n_tokens > 0 && p.n_seqs > 0 && mla_decode_supported(p)) {
    const int splits = mla_decode_splits(p, n_sms_);
    if (mla_combine_uv_fusable(p, f.mm, splits)) {
      FRUGAL_ASSIGN_OR_RETURN(void* partials, scratch(mla_decode_scratch_bytes(p, splits)));
      FRUGAL_RETURN_IF_ERROR(check_launch(launch_mla_decode_uv(p, splits, partials, f.mm, stream_), "mla_decode_uv"));
      ++fused_mla_uv_calls_;
      return Status::ok();
    }
  }
  return ops::Backend::attention_batched_matmul(f);
}

// MLA's attention part of a layer: one persistent kernel for a single decode token where
// plan_mla_attention applies (mla_attention.cu), else the sequence of this backend's ops, its
// prologue and absorbed q projection in one launch where mla_prologue_absorb_fusable.
Status CudaBackend::mla_attention(const ops::MlaAttentionParams& p) {
  const MlaAttentionPlan plan = plan_mla_attention(p, n_sms_, max_smem_optin_);
  if (!plan.applies) {
    if (!fuse_mla_pro_abs_ || !fuse_mla_prologue_ || !mla_prologue_absorb_fusable(p)) return ops::Backend::mla_attention(p);
    FRUGAL_RETURN_IF_ERROR(rms_norm_matmul(p.qkv));
    FRUGAL_RETURN_IF_ERROR(check_rope(p.prologue.rope));
    FRUGAL_RETURN_IF_ERROR(check_kv_write(p.prologue.kv));
    FRUGAL_RETURN_IF_ERROR(check_launch(launch_mla_prologue_absorb(p, stream_), "mla_prologue_absorb"));
    ++fused_mla_pro_abs_calls_;
    FRUGAL_RETURN_IF_ERROR(attention_batched_matmul(p.attn));
    return matmul(p.o);
  }
  FRUGAL_RETURN_IF_ERROR(check_rope(p.prologue.rope));
  FRUGAL_RETURN_IF_ERROR(check_kv_write(p.prologue.kv));
  FRUGAL_ASSIGN_OR_RETURN(void* partials, scratch(plan.scratch_bytes));
  FRUGAL_RETURN_IF_ERROR(check_launch(
      launch_mla_attention(p, plan, partials, grid_sync_, stream_, mla_stamps_, mla_stamp_slots_), "mla_attention"));
  ++fused_mla_attention_calls_;
  return Status::ok();
}

Status CudaBackend::set_mla_attention_stamps(int slots) {
  if (slots < 0 || slots > (1 << 20)) return invalid_argument("mla_attention stamps: slots out of range (0..2^20)");
  FRUGAL_RETURN_IF_ERROR(synchronize());
  // Graphs captured while the old ring was on still write into it: it stays until the backend goes.
  if (mla_stamps_) retired_mla_stamps_.push_back(mla_stamps_);
  mla_stamps_ = nullptr;
  mla_stamp_slots_ = 0;
  if (slots == 0) return Status::ok();
  const size_t bytes = sizeof(unsigned long long) * kMlaAttnStamps * static_cast<size_t>(slots) * n_sms_;
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMalloc(&mla_stamps_, bytes), "mla_attention stamps alloc"));
  FRUGAL_RETURN_IF_ERROR(cuda_status(cudaMemset(mla_stamps_, 0, bytes), "mla_attention stamps zero"));
  mla_stamp_slots_ = slots;
  return Status::ok();
}

Result<std::vector<unsigned long long>> CudaBackend::mla_attention_stamps() {
  std::vector<unsigned long long> out(static_cast<size_t>(kMlaAttnStamps) * mla_stamp_slots_ * n_sms_);
  if (out.empty()) return out;
  FRUGAL_RETURN_IF_ERROR(synchronize());
  FRUGAL_RETURN_IF_ERROR(cuda_status(
      cudaMemcpy(out.data(), mla_stamps_, out.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost),
      "mla_attention stamps read"));
  return out;
}

// One new token per sequence (decode) goes to the split-KV kernel, anything else to the
// tensor-core prefill kernel; both are correct for every layout, only their speed differs.
Status CudaBackend::attention(const ops::AttentionParams& p) {
  // Every path below reads bf16/f16/f32, fp8 e4m3 and int8 caches (with their scales) and
  // attention sinks.
  if (p.sink_tokens < 0) return invalid_argument("cuda attention: sink_tokens " + std::to_string(p.sink_tokens) + " < 0");
  if (p.cache.cache_dtype == DType::kI8 && (p.cache.k_scales == nullptr || p.cache.v_scales == nullptr))
    return invalid_argument("cuda attention: int8 KV cache without its k_scales / v_scales tensors");
  if (p.n_tokens == 0 || p.n_seqs == 0) return Status::ok();
  const bool decode = p.n_tokens <= p.n_seqs;
  // MLA's latent cache (one KV head, K == V, 576 wide): its own kernel (mla.cu), one block per
  // query token, for decode tokens and prefill chunks alike.
  if (mla_decode_supported(p)) {
    const int splits = mla_decode_splits(p, n_sms_);
    void* partials = nullptr;
    if (size_t bytes = mla_decode_scratch_bytes(p, splits); bytes > 0) {
      FRUGAL_ASSIGN_OR_RETURN(partials, scratch(bytes));
    }
    return check_launch(launch_mla_decode(p, splits, partials, decode_counters_, stream_), "mla_decode");
  }
  if (decode && attention_decode_supported(p)) {
    const int n_splits = attention_decode_splits(p, n_sms_);
    void* partials = nullptr;
    if (size_t bytes = attention_decode_scratch_bytes(p, n_splits); bytes > 0) {
      FRUGAL_ASSIGN_OR_RETURN(partials, scratch(bytes));
    }
    return check_launch(launch_attention_decode(p, n_splits, partials, decode_counters_, stream_, n_sms_), "attention_decode");
  }
  // A mixed step (decodes first, then prefill chunks): the decode kernel takes the decoders
  // (the prefill kernel would give each one a 64-row tile of which one row is used) and the
  // prefill kernel the chunks. Both write disjoint rows of out; scratch is reserved once for
  // the larger of the two, and the stream orders their use of it.
  if (!decode && p.n_decode_seqs > 0 && p.n_decode_seqs < p.n_seqs && attention_decode_supported(p) &&
      attention_prefill_supported(p)) {
    const int n_dec = p.n_decode_seqs;
    ops::AttentionParams d = p;
    d.n_seqs = n_dec;
    d.n_tokens = n_dec;
    if (p.decode_max_ctx_len > 0) d.max_ctx_len = p.decode_max_ctx_len;
    ops::AttentionParams f = p;
    f.n_seqs = p.n_seqs - n_dec;
    f.n_tokens = p.n_tokens - n_dec;
    f.q_start = p.q_start + n_dec;
    f.ctx_len = p.ctx_len + n_dec;
    f.block_tables = p.block_tables + static_cast<int64_t>(n_dec) * p.max_blocks_per_seq;
    f.n_decode_seqs = 0;
    const int d_splits = attention_decode_splits(d, n_sms_), f_splits = attention_prefill_splits(f, n_sms_);
    const size_t bytes = std::max(attention_decode_scratch_bytes(d, d_splits), attention_prefill_scratch_bytes(f, f_splits));
    void* partials = nullptr;
    if (bytes > 0) {
      FRUGAL_ASSIGN_OR_RETURN(partials, scratch(bytes));
    }
    FRUGAL_RETURN_IF_ERROR(check_launch(launch_attention_decode(d, d_splits, partials, decode_counters_, stream_, n_sms_), "attention_decode"));
    return check_launch(launch_attention_prefill(f, f_splits, partials, stream_), "attention_prefill");
  }
  if (attention_prefill_supported(p)) {
    const int n_splits = attention_prefill_splits(p, n_sms_);
    void* partials = nullptr;
    if (size_t bytes = attention_prefill_scratch_bytes(p, n_splits); bytes > 0) {
      FRUGAL_ASSIGN_OR_RETURN(partials, scratch(bytes));
    }
    return check_launch(launch_attention_prefill(p, n_splits, partials, stream_), "attention_prefill");
  }
  const bool quant = p.cache.cache_dtype == DType::kF8E4M3 || p.cache.cache_dtype == DType::kI8;
  if (!is_float_act(p.act_dtype) || !(quant || is_float_act(p.cache.cache_dtype)))
    return unsupported("cuda attention: act " + dt(p.act_dtype) + ", cache " + dt(p.cache.cache_dtype));
  return check_launch(launch_attention_generic(p, stream_), "attention_generic");
}

Status CudaBackend::silu_mul(const ops::SiluMulParams& p) {
  if (!is_float_act(p.act_dtype)) return unsupported("cuda silu_mul: act " + dt(p.act_dtype));
  return check_launch(launch_silu_mul(p, stream_), "silu_mul");
}

namespace {
// act reads exactly the [gate | up] halves of mm.y, as the model's gate_up projection writes them.
bool silu_mul_reads_halves(const ops::MatmulSiluMulParams& p) {
  const ops::MatmulParams& mm = p.mm;
  const ops::SiluMulParams& a = p.act;
  return mm.m > 0 && mm.n > 0 && mm.n % 2 == 0 && !mm.accumulate && a.dim == mm.n / 2 && a.n_tokens == mm.m &&
         a.act_dtype == mm.y_dtype && is_float_act(a.act_dtype) && a.gate == mm.y &&
         a.up == static_cast<const uint8_t*>(mm.y) + dtype_bytes(mm.y_dtype, a.dim) && a.ld_gate == mm.ld_y &&
         a.ld_up == mm.ld_y;
}
}  // namespace

// SwiGLU's gate_up projection and silu_mul: when act reads the halves of mm.y and the matmul runs
// a GEMV (the dense GEMV, or the quantized one at m <= 8 below the GEMM's range), that GEMV
// writes act.out from its epilogue (gemv.cu, quant_gemv.cu) and mm.y is not written; else
// matmul then silu_mul. Off by default (FRUGAL_FUSE_SILU=1 / set_fuse_silu_mul(true) turns it on).
Status CudaBackend::matmul_silu_mul(const ops::MatmulSiluMulParams& p) {
  const ops::MatmulParams& mm = p.mm;
  if (fuse_silu_mul_ && silu_mul_reads_halves(p)) {
    FRUGAL_RETURN_IF_ERROR(check_matmul(mm));
    const SiluMulOut out{.out = p.act.out, .ld_out = p.act.ld_out};
    cudaError_t e = cudaErrorNotReady;  // not fused
    if (mm.w.format.scheme == ops::WeightScheme::kDense) {
      FRUGAL_ASSIGN_OR_RETURN(const bool gemv, dense_takes_gemv(mm));
      if (gemv) e = launch_gemv(mm, stream_, &out);
    } else if (mm.m <= 8 && mm.m < quant_gemm_min_m(quant_gemm_kernel_, quant_gemm_min_m_) && quant_gemv_first(mm)) {
      e = launch_quant_gemv(mm, stream_, &out, quant_gemv_kernel_);
    }
    if (e != cudaErrorNotReady) {
      FRUGAL_RETURN_IF_ERROR(check_launch(e, "gemv_silu_mul"));
      ++fused_silu_mul_calls_;
      return Status::ok();
    }
  }
  // The slab GEMM in k slices: silu_mul adds the partials itself (no reduce kernel).
  if (fuse_split_ && split_silu_mul_ok(mm, p.act)) {
    FRUGAL_ASSIGN_OR_RETURN(const bool ran, split_epilogue(mm, "split_silu_mul", [&](const float* part, int splits) {
      return launch_split_silu_mul(mm, part, splits, p.act, stream_);
    }));
    if (ran) return Status::ok();
  }
  return ops::Backend::matmul_silu_mul(p);  // the sequence
}

// The fused qkv projection, then RoPE and the cache write over its rows: where the matmul runs the
// slab GEMM in k slices (and rope_kv_write would fuse), the RoPE kernel adds the partials
// (split_rope_kv_write); else matmul then rope_kv_write.
Status CudaBackend::matmul_rope_kv_write(const ops::MatmulRopeKvWriteParams& p) {
  if (fuse_split_ && fuse_rope_kv_ && split_rope_kv_write_ok(p.mm, p.rkv)) {
    FRUGAL_RETURN_IF_ERROR(check_rope(p.rkv.rope));
    FRUGAL_RETURN_IF_ERROR(check_kv_write(p.rkv.kv));
    FRUGAL_ASSIGN_OR_RETURN(const bool ran, split_epilogue(p.mm, "split_rope_kv_write", [&](const float* part, int splits) {
      return launch_split_rope_kv_write(p.mm, part, splits, p.rkv, stream_);
    }));
    if (ran) return Status::ok();
  }
  return ops::Backend::matmul_rope_kv_write(p);  // the sequence
}

// A projection into the residual stream, then the next block's norm over it: where the matmul
// runs the slab GEMM in k slices, the norm's kernel adds the partials (split_rms_norm: y written,
// then normalized); else the two ops.
Status CudaBackend::matmul_rms_norm(const ops::MatmulRmsNormParams& p) {
  if (fuse_split_ && split_rms_norm_ok(p.mm, p.norm)) {
    FRUGAL_ASSIGN_OR_RETURN(const bool ran, split_epilogue(p.mm, "split_rms_norm", [&](const float* part, int splits) {
      return launch_split_rms_norm(p.mm, part, splits, p.norm, stream_);
    }));
    if (ran) return Status::ok();
  }
  return ops::Backend::matmul_rms_norm(p);  // the sequence
}

// SwiGLU's down projection over silu(gate) * up: where the matmul reads exactly act's product
// (bf16) and runs FP8 W8A8, the activation quantization computes the product itself (bit for
// bit silu_mul's bf16 values) and act.out is not written; else silu_mul then matmul.
Status CudaBackend::silu_mul_matmul(const ops::SiluMulMatmulParams& p) {
  const ops::MatmulParams& mm = p.mm;
  const ops::SiluMulParams& a = p.act;
  const bool reads_product = mm.x == a.out && mm.x_dtype == DType::kBF16 && a.act_dtype == DType::kBF16 &&
                             mm.ld_x == a.ld_out && mm.k == a.dim && mm.m == a.n_tokens && mm.m > 0 && mm.n > 0;
  if (fuse_silu_quant_ && reads_product && matmul_goes_w8a8(mm)) {
    FRUGAL_RETURN_IF_ERROR(check_matmul(mm));
    Status st = matmul_w8a8(mm, &a);
    if (st.code() != ErrorCode::kUnsupported) {
      if (st) ++fused_silu_quant_calls_;
      return st;
    }
  }
  return ops::Backend::silu_mul_matmul(p);  // the sequence
}

namespace {
Status check_route(const ops::MoeRouteParams& p) {
  if (p.n_experts <= 0 || p.n_experts > ops::kMoeMaxExperts || p.top_k <= 0 || p.top_k > p.n_experts ||
      p.top_k > ops::kMoeMaxTopK || p.n_group <= 0 || p.n_experts % p.n_group != 0 || p.topk_group <= 0 ||
      p.topk_group > p.n_group)
    return invalid_argument("cuda moe_route: n_experts " + std::to_string(p.n_experts) + ", top_k " +
                            std::to_string(p.top_k) + ", n_group " + std::to_string(p.n_group) + ", topk_group " +
                            std::to_string(p.topk_group) + " out of range");
  return Status::ok();
}
}  // namespace

Status CudaBackend::moe_route(const ops::MoeRouteParams& p) {
  FRUGAL_RETURN_IF_ERROR(check_route(p));
  return check_launch(launch_moe_route(p, stream_), "moe_route");
}

// Fused where the router's matmul takes the GEMV (dense_takes_gemv, so the logits are the GEMV's
// bits) and the Params have the model's data flow (moe_router_fusable), by route_mode_ (set_route_mode,
// FRUGAL_FUSE_ROUTE): 1, one cluster kernel (sm_90) with the norm inside where
// moe_router_norm_fusable, else rms_norm's kernel first; 2, rms_norm's kernel then the cluster
// kernel; 3, rms_norm's kernel then the grid kernel with the last block routing. Otherwise the three ops.
Status CudaBackend::moe_router(const ops::MoeRouterParams& p) {
  if (route_mode_ != 0 && (route_mode_ == 3 || cc_major_ >= 9) && p.mm.m > 0 && moe_router_fusable(p)) {
    FRUGAL_RETURN_IF_ERROR(check_matmul(p.mm));
    FRUGAL_RETURN_IF_ERROR(check_route(p.route));
    FRUGAL_ASSIGN_OR_RETURN(const bool gemv, dense_takes_gemv(p.mm));
    if (gemv) {
      const bool with_norm = route_mode_ == 1 && moe_router_norm_fusable(p);
      if (!with_norm) FRUGAL_RETURN_IF_ERROR(rms_norm(p.norm));
      if (route_mode_ == 3) FRUGAL_RETURN_IF_ERROR(check_launch(launch_moe_router_grid(p, route_counter_, stream_), "moe_router"));
      else FRUGAL_RETURN_IF_ERROR(check_launch(launch_moe_router(p, with_norm, stream_), "moe_router"));
      ++fused_route_calls_;
      return Status::ok();
    }
  }
  return ops::Backend::moe_router(p);  // the sequence
}

// With FRUGAL_FUSE_NORM=1 or set_fuse_norm(true): one GEMV with the norm in its prologue
// (rms_norm_gemv_fusable: m = 1, the GEMV's early-load shape), or, where the matmul runs FP8 W8A8
// (FP8 weights past the weight-only GEMV's tokens, as matmul_quant decides), the norm inside the
// activation quantization (norm.y unwritten but for a tail the GEMV takes). Else rms_norm then
// matmul. The same bits either way.
Status CudaBackend::rms_norm_matmul(const ops::RmsNormMatmulParams& p) {
  const ops::RmsNormParams& n = p.norm;
  const ops::MatmulParams& mm = p.mm;
  if (fuse_norm_ && rms_norm_gemv_fusable(p)) {
    FRUGAL_RETURN_IF_ERROR(check_matmul(mm));
    FRUGAL_RETURN_IF_ERROR(check_launch(launch_rms_norm_gemv(p, stream_), "rms_norm_matmul"));
    ++fused_norm_calls_;
    return Status::ok();
  }
  const bool reads_norm = mm.x == n.y && mm.x_dtype == n.act_dtype && mm.ld_x == n.ld_y && mm.k == n.dim &&
                          mm.m == n.rows && mm.m > 0 && mm.n > 0 && n.residual == nullptr;
  if (fuse_norm_ && reads_norm && matmul_goes_w8a8(mm) && is_float_act(n.act_dtype) && is_float_act(n.weight_dtype)) {
    FRUGAL_RETURN_IF_ERROR(check_matmul(mm));
    Status st = matmul_w8a8(mm, nullptr, &n);
    if (st.code() != ErrorCode::kUnsupported) {
      if (st) ++fused_norm_quant_calls_;
      return st;
    }
  }
  return ops::Backend::rms_norm_matmul(p);  // the sequence
}

// Decode-sized m: one batched GEMV launch; larger m: one strided-batched cuBLASLt matmul for all
// batch entries (at 256 decoders the per-entry loop was 16 launches a projection and ~13% of a
// DeepSeek-V2-Lite step). The dense matmul path per batch entry remains for what that refuses:
// x and w of different dtypes, and operands whose alignment (pointer, ld or batch stride) leaves
// cuBLASLt no algorithm. FRUGAL_BATCHED_MATMUL=loop forces the loop (A/B runs).
Status CudaBackend::batched_matmul(const ops::BatchedMatmulParams& p) {
  if (!is_float_act(p.x_dtype) || !is_float_act(p.y_dtype) || !is_float_act(p.w_dtype))
    return unsupported("cuda batched_matmul: x " + dt(p.x_dtype) + ", w " + dt(p.w_dtype) + ", y " + dt(p.y_dtype));
  if (p.batch < 0 || p.m < 0 || p.n < 0 || p.k < 0) return invalid_argument("cuda batched_matmul: negative batch, m, n or k");
  if (p.batch == 0 || p.m == 0 || p.n == 0) return Status::ok();
  if (p.m <= kBatchedGemvMaxM) return check_launch(launch_batched_gemv(p, stream_), "batched_gemv");
  static const bool force_loop = [] {
    const char* v = std::getenv("FRUGAL_BATCHED_MATMUL");
    return v && std::strcmp(v, "loop") == 0;
  }();
  if (!force_loop && LtGemm::supports(p)) {
    Status st = lt_->run_batched(p, stream_);
    if (st.is_ok()) ++lt_batched_calls_;
    if (st.code() != ErrorCode::kUnsupported) return st;
  }
  for (int64_t b = 0; b < p.batch; ++b)
    FRUGAL_RETURN_IF_ERROR(matmul_dense(ops::MatmulParams{
        .x = static_cast<const uint8_t*>(p.x) + dtype_bytes(p.x_dtype, b * p.stride_x), .x_dtype = p.x_dtype, .ld_x = p.ld_x,
        .w = ops::dense_weight(static_cast<const uint8_t*>(p.w) + dtype_bytes(p.w_dtype, b * p.stride_w), p.w_dtype),
        .bias = nullptr, .bias_dtype = DType::kF32, .y = static_cast<uint8_t*>(p.y) + dtype_bytes(p.y_dtype, b * p.stride_y),
        .y_dtype = p.y_dtype, .ld_y = p.ld_y, .m = p.m, .n = p.n, .k = p.k, .accumulate = false}));
  return Status::ok();
}

// topk_idx is device memory, so its ids are not checked here: the kernels treat an id outside
// [first_expert, first_expert + n_experts) as another rank's expert (it adds nothing).
// The shared experts (p.has_shared()) are fused into the tiny path's kernels where they are
// dense bf16 (moe_experts_fuses_shared); elsewhere they follow the routed combine as this
// backend's ops (matmul_silu_mul over shared_gate_up when given, else two matmuls and silu_mul,
// then down accumulating into out) on the scratch's last region, free once the combine is done.
Status CudaBackend::moe_experts(const ops::MoeExpertsParams& p) {
  if (p.n_experts <= 0 || p.n_experts > ops::kMoeMaxExperts || p.hidden <= 0 || p.inter <= 0 || p.n_tokens < 0)
    return invalid_argument("cuda moe_experts: n_experts " + std::to_string(p.n_experts) + " (must be in [1, " +
                            std::to_string(ops::kMoeMaxExperts) + "]), hidden " + std::to_string(p.hidden) + ", inter " +
                            std::to_string(p.inter) + ", n_tokens " + std::to_string(p.n_tokens) + " out of range");
  if (p.first_expert < 0 || p.n_routed < 0 || p.routed() > ops::kMoeMaxExperts ||
      int64_t{p.first_expert} + p.n_experts > p.routed())
    return invalid_argument("cuda moe_experts: experts [first_expert, first_expert + n_experts) = [" +
                            std::to_string(p.first_expert) + ", " + std::to_string(int64_t{p.first_expert} + p.n_experts) +
                            ") must lie in [0, n_routed = " + std::to_string(p.routed()) + "), n_routed <= " +
                            std::to_string(ops::kMoeMaxExperts));
  if (p.top_k <= 0 || p.top_k > p.routed() || p.top_k > ops::kMoeMaxTopK)
    return invalid_argument("cuda moe_experts: top_k " + std::to_string(p.top_k) + " must be in [1, min(n_routed = " +
                            std::to_string(p.routed()) + ", " + std::to_string(ops::kMoeMaxTopK) + ")]");
  if (p.act_dtype != DType::kBF16 || p.format.scheme != ops::WeightScheme::kDense || p.format.dtype != DType::kBF16)
    return unsupported("cuda moe_experts: act " + dt(p.act_dtype) + ", experts '" + ops::weight_format_name(p.format) +
                       "' (the grouped kernels take bf16 activations and dense bf16 experts)");
  if (p.shared_inter < 0) return invalid_argument("cuda moe_experts: shared_inter " + std::to_string(p.shared_inter) + " < 0");
  if (p.has_shared() && (!p.shared_gate.data || !p.shared_up.data || !p.shared_down.data))
    return invalid_argument("cuda moe_experts: shared_inter " + std::to_string(p.shared_inter) +
                            " with a null shared_gate, shared_up or shared_down");
  if (p.n_tokens == 0) return Status::ok();
  const int64_t need = ops::moe_experts_scratch_bytes(p.n_tokens, p.top_k, p.n_experts, p.hidden, p.inter, p.shared_inter);
  if (!p.scratch || p.scratch_bytes < need)
    return invalid_argument("cuda moe_experts: scratch of " + std::to_string(p.scratch_bytes) + " bytes, needs " +
                            std::to_string(need));
  FRUGAL_RETURN_IF_ERROR(check_launch(launch_moe_experts(p, stream_), "moe_experts"));
  if (!p.has_shared() || moe_experts_fuses_shared(p)) return Status::ok();
  const int64_t n = p.n_tokens, S = p.shared_inter, H = p.hidden;
  auto* region = static_cast<uint8_t*>(p.scratch) + ops::moe_experts_shared_scratch_offset(n, p.top_k, p.n_experts, p.inter);
  void* gu = region;                                              // [n, 2 S]: [gate | up] rows
  void* prod = region + ops::moe_experts_shared_h_offset(n, S);  // [n, S]
  const DType act = p.act_dtype;
  void* up = static_cast<uint8_t*>(gu) + dtype_bytes(act, S);
  const ops::SiluMulParams sm{.gate = gu, .up = up, .out = prod, .act_dtype = act, .n_tokens = n, .dim = S,
                              .ld_gate = 2 * S, .ld_up = 2 * S, .ld_out = S};
  auto proj = [&](const ops::WeightView& w, void* y, int64_t cols) {
    return ops::MatmulParams{.x = p.x, .x_dtype = act, .ld_x = p.ld_x, .w = w, .bias = nullptr, .bias_dtype = DType::kF32,
                             .y = y, .y_dtype = act, .ld_y = 2 * S, .m = n, .n = cols, .k = H, .accumulate = false};
  };
  if (p.shared_gate_up.data) {
    FRUGAL_RETURN_IF_ERROR(matmul_silu_mul(ops::MatmulSiluMulParams{.mm = proj(p.shared_gate_up, gu, 2 * S), .act = sm}));
  } else {
    FRUGAL_RETURN_IF_ERROR(matmul(proj(p.shared_gate, gu, S)));
    FRUGAL_RETURN_IF_ERROR(matmul(proj(p.shared_up, up, S)));
    FRUGAL_RETURN_IF_ERROR(silu_mul(sm));
  }
  return matmul(ops::MatmulParams{.x = prod, .x_dtype = act, .ld_x = S, .w = p.shared_down, .bias = nullptr,
                                  .bias_dtype = DType::kF32, .y = p.out, .y_dtype = act, .ld_y = p.ld_out, .m = n,
                                  .n = H, .k = S, .accumulate = true});
}

Status CudaBackend::scale_rows(const ops::ScaleRowsParams& p) {
  if (!is_float_act(p.act_dtype)) return unsupported("cuda scale_rows: act " + dt(p.act_dtype));
  return check_launch(launch_scale_rows(p, stream_), "scale_rows");
}

Status CudaBackend::gather_rows(const ops::GatherRowsParams& p) {
  if (!is_float_act(p.x_dtype) || !is_float_act(p.out_dtype))
    return unsupported("cuda gather_rows: " + dt(p.x_dtype) + " -> " + dt(p.out_dtype));
  return check_launch(launch_gather_rows(p, stream_), "gather_rows");
}

Status CudaBackend::sample(const SampleParams& p) {
  if (!is_float_act(p.logits_dtype)) return unsupported("cuda sample: logits " + dt(p.logits_dtype));
  return check_launch(launch_sample(p, stream_), "sample");
}

bool CudaBackend::has_graph(uint64_t key) const { return graphs_->has(key); }

int64_t CudaBackend::graph_count() const { return static_cast<int64_t>(graphs_->size()); }

Status CudaBackend::capture_graph(uint64_t key, const std::function<Status()>& record) {
  if (capturing_) return internal_error("cuda capture_graph inside a capture");
  size_t free_before = 0, free_after = 0, total = 0;
  const bool measured = cudaMemGetInfo(&free_before, &total) == cudaSuccess;
  FRUGAL_RETURN_IF_ERROR(graphs_->ensure(key, record));
  if (measured && cudaMemGetInfo(&free_after, &total) == cudaSuccess && free_after < free_before)
    graph_bytes_ += static_cast<int64_t>(free_before - free_after);
  return Status::ok();
}

Status CudaBackend::replay_graph(uint64_t key) { return graphs_->replay(key); }

Result<std::unique_ptr<ops::Backend>> make_cuda_backend(int device) {
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> b, CudaBackend::create(device));
  return std::unique_ptr<ops::Backend>(std::move(b));
}

}  // namespace frugal::cuda
