// The one list of ops (STYLE.md habit 3): the Backend interface, the reference, CPU validation,
// every backend's declarations and the op harness are all generated from it, so adding an op is
// one line here plus the code that is really new (its Params, reference, kernels, harness
// cases); a backend that lacks it fails to compile instead of silently skipping it.
//
//   X(Name, method): Params type ops::Name##Params, enum value ops::OpKind::k##Name, Backend
//   method `Status method(const Name##Params&)`, reference `void ops::ref::method(const Name##Params&)`.
//
// No STL here (included by .cu files through backend headers).
#pragma once

// Ops every backend implements (pure virtual in ops::Backend).
#define FRUGAL_OPS(X)       \
  X(Embedding, embedding)   \
  X(RmsNorm, rms_norm)      \
  X(Matmul, matmul)         \
  X(Rope, rope)             \
  X(KvWrite, kv_write)      \
  X(Attention, attention)   \
  X(SiluMul, silu_mul)      \
  X(GatherRows, gather_rows) \
  X(MoeRoute, moe_route)    \
  X(ScaleRows, scale_rows)  \
  X(MoeExperts, moe_experts) \
  X(BatchedMatmul, batched_matmul)

// Ops a backend may lack: ops::Backend's default returns unsupported (and supports_<method>()
// says false). The engine falls back to the host for these.
#define FRUGAL_OPTIONAL_OPS(X) X(Sample, sample)

// Fused ops: a fixed sequence of the ops above (their Params hold each step's Params).
// ops::Backend's default runs the sequence through the backend's own ops, so every backend has
// them; a backend overrides one to run it in fewer kernels where the data flow allows
// (ops/params.h says what each may skip). The reference is the sequence of references.
#define FRUGAL_FUSED_OPS(X)             \
  X(RopeKvWrite, rope_kv_write)         \
  X(MatmulRopeKvWrite, matmul_rope_kv_write) \
  X(MatmulSiluMul, matmul_silu_mul)     \
  X(SiluMulMatmul, silu_mul_matmul)     \
  X(MlaKvPrologue, mla_kv_prologue)     \
  X(MoeRouter, moe_router)              \
  X(MoeBlock, moe_block)                \
  X(RmsNormMatmul, rms_norm_matmul)     \
  X(MatmulRmsNorm, matmul_rms_norm)     \
  X(AttentionBatchedMatmul, attention_batched_matmul) \
  X(MlaAttention, mla_attention)

#define FRUGAL_ALL_OPS(X) FRUGAL_OPS(X) FRUGAL_OPTIONAL_OPS(X) FRUGAL_FUSED_OPS(X)

// Declares every required op as an override, inside a class deriving from ops::Backend:
//   class MyBackend final : public ops::Backend { ... FRUGAL_BACKEND_OP_OVERRIDES ... };
#define FRUGAL_BACKEND_OP_OVERRIDE_(Name, method) \
  ::frugal::Status method(const ::frugal::ops::Name##Params& p) override;
#define FRUGAL_BACKEND_OP_OVERRIDES FRUGAL_OPS(FRUGAL_BACKEND_OP_OVERRIDE_)
