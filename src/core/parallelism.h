// How one model is split over devices. Tensor parallelism only for now (the engine runs N ranks:
// docs/parallelism.md, model/shard.h; the planner predicts N). Pipeline and expert parallelism
// join here.
#pragma once

#include <cstdint>

namespace frugal {

struct Parallelism {
  int32_t tensor_parallel = 1;  // ranks each layer's heads and matmuls are split over (>= 1)
};

}  // namespace frugal
