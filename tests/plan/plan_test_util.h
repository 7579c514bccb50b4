// Shared helpers for the planner tests: catalog lookups that fail the test loudly.
#pragma once

#include <gtest/gtest.h>

#include "test_paths.h"
#include "plan/planner.h"

namespace frugal::plan::testing_util {

inline std::string catalog_dir() { return frugal::testing::source_root() + "/data/catalog"; }

inline ModelEntry model(const std::string& name) {
  auto r = resolve_model(name, catalog_dir());
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? *r : ModelEntry{};
}

inline GpuSpec gpu(const std::string& name) {
  auto cat = load_gpu_catalog(catalog_dir());
  EXPECT_TRUE(cat.is_ok()) << cat.status().to_string();
  if (!cat.is_ok()) return {};
  auto g = find_gpu(*cat, name);
  EXPECT_TRUE(g.is_ok()) << g.status().to_string();
  return g.is_ok() ? *g : GpuSpec{};
}

inline PlanRequest request(const std::string& m, const std::string& g, WeightPrecision p) {
  PlanRequest r;
  r.model = model(m);
  r.gpu = gpu(g);
  r.quant.precision = p;
  return r;
}

inline Plan plan(const PlanRequest& r) {
  auto p = make_plan(r);
  EXPECT_TRUE(p.is_ok()) << p.status().to_string();
  return p.is_ok() ? *p : Plan{};
}

}  // namespace frugal::plan::testing_util
