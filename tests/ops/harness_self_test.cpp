// The op harness judged on backends that misbehave on purpose (issue 14, acceptance 5): a
// backend that refuses a case its support table expects must make the harness fail, naming the
// case; a refusal the table lists must not; and a case the table lists as refused but that runs
// must fail too (the table stays true).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "harness.h"
#include "ops/forwarding_backend.h"
#include "ops/ref_backend.h"

namespace frugal::testing {
namespace {

// The reference backend, refusing matmuls with f16 weights: every one, or only those with m = 7.
class RefusingBackend final : public ops::ForwardingBackend {
 public:
  explicit RefusingBackend(bool only_m7) : ForwardingBackend(ops::make_ref_backend()), only_m7_(only_m7) {}
  std::string name() const override { return "fake-refusing"; }
  Status matmul(const ops::MatmulParams& p) override {
    if (p.w.format.dtype == DType::kF16 && (!only_m7_ || p.m == 7)) return unsupported("fake: no f16 matmul");
    return ForwardingBackend::matmul(p);
  }

 private:
  bool only_m7_;
};

// Runs the matmul cases with failures captured; returns them.
std::vector<std::string> matmul_failures(ops::Backend* backend, const SupportTable& table, OpCases** out = nullptr) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    OpCases cases(backend, &table);
    cases.matmul();
  }
  std::vector<std::string> msgs;
  for (int i = 0; i < results.size(); ++i) msgs.push_back(results.GetTestPartResult(i).message());
  return msgs;
}

TEST(OpHarnessSelf, FailsOnOneUnexpectedRefusal) {
  RefusingBackend b(/*only_m7=*/true);
  const SupportTable all_supported;
  const auto failures = matmul_failures(&b, all_supported);
  // The f16 cases with m = 7: 4 k values x 3 n values.
  ASSERT_EQ(failures.size(), 12u);
  for (const auto& f : failures) {
    EXPECT_NE(f.find("refused a case its support table expects"), std::string::npos) << f;
    EXPECT_NE(f.find("matmul m=7"), std::string::npos) << f;
    EXPECT_NE(f.find("w=f16"), std::string::npos) << f;
    EXPECT_NE(f.find("fake: no f16 matmul"), std::string::npos) << f;
  }
}

TEST(OpHarnessSelf, ListedRefusalPasses) {
  RefusingBackend b(/*only_m7=*/false);
  const SupportTable table({{ops::OpKind::kMatmul, "w=dense f16", "fake backend: no f16 kernels"}});
  const auto failures = matmul_failures(&b, table);
  EXPECT_TRUE(failures.empty()) << failures.front();
}

TEST(OpHarnessSelf, ListedRefusalThatRunsFails) {
  auto ref = ops::make_ref_backend();
  const SupportTable table({{ops::OpKind::kMatmul, "w=dense f16", "stale entry"}});
  const auto failures = matmul_failures(ref.get(), table);
  ASSERT_FALSE(failures.empty());
  for (const auto& f : failures) EXPECT_NE(f.find("update the table"), std::string::npos) << f;
}

TEST(OpHarnessSelf, EveryBackendHasATable) {
  for (const char* name : {"ref", "cpu", "cuda"}) EXPECT_NE(support_table_for(name), nullptr) << name;
  EXPECT_EQ(support_table_for("no-such-backend"), nullptr);
}

}  // namespace
}  // namespace frugal::testing
