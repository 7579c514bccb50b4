// Checks of op Params against the contract in ops/params.h, done on the host before any kernel
// runs: a bad shape, stride, dtype or index from a caller becomes a Status naming the op and the
// field, never an out-of-bounds access. Index arrays (ids, slot_mapping, q_start, ctx_len,
// block_tables) are read, so these checks need host-visible pointers.
#pragma once

#include "core/status.h"
#include "ops/params.h"

namespace frugal::cpu {

// dtype is one of f32, bf16, f16 (the float storage types kernels convert in registers).
bool is_float16_or_32(DType t);

Status validate(const ops::EmbeddingParams& p);
Status validate(const ops::RmsNormParams& p);
Status validate(const ops::MatmulParams& p);
Status validate(const ops::RopeParams& p);
Status validate(const ops::KvWriteParams& p);
Status validate(const ops::AttentionParams& p);
Status validate(const ops::SiluMulParams& p);
Status validate(const ops::GatherRowsParams& p);

}  // namespace frugal::cpu
