// The shared op harness (tests/ops) on the CUDA backend: every op against ops::ref on odd
// shapes, strided rows, guard bytes and NaN sentinels, in the backend's bf16 activations.
#include "harness.h"

FRUGAL_INSTANTIATE_OP_HARNESS(Cuda, "cuda");
