// The op harness on the CPU backend (at the best ISA here; CMake re-runs it under
// FRUGAL_ISA=avx2 and FRUGAL_ISA=scalar) and on the reference backend (a self-check of the
// harness plumbing: guards, gaps and uploads must all hold when the backend is the oracle).
#include "harness.h"

FRUGAL_INSTANTIATE_OP_HARNESS(Cpu, "cpu");
FRUGAL_INSTANTIATE_OP_HARNESS(Ref, "ref");
