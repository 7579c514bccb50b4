// Checks of op Params against the contract in ops/params.h, done on the host before any kernel
// runs: a bad shape, stride, dtype or index from a caller becomes a Status naming the op and the
// field, never an out-of-bounds access. Index arrays (ids, slot_mapping, q_start, ctx_len,
// block_tables) are read, so these checks need host-visible pointers.
#pragma once

#include "core/status.h"
#include "ops/op_list.h"
#include "ops/params.h"

namespace frugal::cpu {

// dtype is one of f32, bf16, f16 (the float storage types kernels convert in registers).
bool is_float16_or_32(DType t);

// One per op of ops/op_list.h. Matmul checks the weight format is one frugal defines
// (ops::check_weight_view); whether the CPU has kernels for it is cpu_backend.cpp's choice.
#define FRUGAL_CPU_VALIDATE_(Name, method) Status validate(const ops::Name##Params& p);
FRUGAL_OPS(FRUGAL_CPU_VALIDATE_)
#undef FRUGAL_CPU_VALIDATE_

}  // namespace frugal::cpu
