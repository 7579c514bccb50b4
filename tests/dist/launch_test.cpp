// The environment `frugal ... --tensor-parallel-size N --nnodes M --node-rank K` gives the ranks
// it starts on one host (dist/launch.h), against hand-written expectations.
#include <gtest/gtest.h>

#include "dist/launch.h"

namespace frugal::dist {
namespace {

std::string get(const EnvVars& e, const std::string& k) {
  for (const auto& [key, v] : e)
    if (key == k) return v;
  return "<unset>";
}

TEST(LocalRankEnvs, OneHostNumbersRanksFromZero) {
  const RankEnv rv{.master_addr = "127.0.0.1", .master_port = 29500};
  auto e = local_rank_envs(4, {}, rv);
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  ASSERT_EQ(e->size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(get((*e)[r], "RANK"), std::to_string(r));
    EXPECT_EQ(get((*e)[r], "LOCAL_RANK"), std::to_string(r));
    EXPECT_EQ(get((*e)[r], "WORLD_SIZE"), "4");
    EXPECT_EQ(get((*e)[r], "MASTER_ADDR"), "127.0.0.1");
    EXPECT_EQ(get((*e)[r], "MASTER_PORT"), "29500");
  }
}

TEST(LocalRankEnvs, SecondOfTwoHostsTakesTheUpperHalf) {
  const RankEnv rv{.master_addr = "10.1.2.3", .master_port = 6000};
  auto e = local_rank_envs(8, {.nnodes = 2, .node_rank = 1}, rv);
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  ASSERT_EQ(e->size(), 4u);  // 8 ranks over 2 hosts
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(get((*e)[r], "RANK"), std::to_string(4 + r));
    EXPECT_EQ(get((*e)[r], "LOCAL_RANK"), std::to_string(r));  // the GPU on this host
    EXPECT_EQ(get((*e)[r], "WORLD_SIZE"), "8");
    EXPECT_EQ(get((*e)[r], "MASTER_ADDR"), "10.1.2.3");
    EXPECT_EQ(get((*e)[r], "MASTER_PORT"), "6000");
  }
}

TEST(LocalRankEnvs, BadNodeCountsNameTheFlag) {
  const RankEnv rv;
  auto uneven = local_rank_envs(6, {.nnodes = 4, .node_rank = 0}, rv);
  EXPECT_EQ(uneven.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(uneven.status().message().find("does not split evenly over --nnodes 4"), std::string::npos);
  auto rank = local_rank_envs(4, {.nnodes = 2, .node_rank = 2}, rv);
  EXPECT_NE(rank.status().message().find("--node-rank 2"), std::string::npos);
  auto zero = local_rank_envs(4, {.nnodes = 0, .node_rank = 0}, rv);
  EXPECT_NE(zero.status().message().find("--nnodes must be >= 1"), std::string::npos);
}

TEST(LaunchLocalRanks, CpuRanksOnSeveralHostsAreMpirunsJob) {
  auto rc = launch_local_ranks(RankKind::kCpuMpi, 4, {"frugal", "run"}, RankEnv{}, {.nnodes = 2, .node_rank = 0});
  EXPECT_EQ(rc.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(rc.status().message().find("mpirun --hostfile"), std::string::npos) << rc.status().to_string();
}

}  // namespace
}  // namespace frugal::dist
