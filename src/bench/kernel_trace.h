// Where a step's GPU time goes: the accounting `frugal bench offline --kernel-trace` makes of a
// kernel trace (core/kernel_trace.h) of one repetition of a benchmark point.
//
// Steps. With CUDA graphs every replay is one graph launch, and all its kernels share the launch's
// correlation ID: each such group is a step. The first and the last group are left out (the step
// after a prefill and the last step run cold or alone), so the window is the second group's start
// to the last-but-one group's end, and "steps" is the groups inside it. Without graphs (eager
// launches: prefill, or graphs off) the window is the whole trace and the steps are the engine's
// (the caller counts them).
//
// Time. Inside the window the device is either busy (some kernel running) or idle. Busy time is
// split among kernels by "own time": each instant goes to the oldest kernel running then. On one
// stream with programmatic dependent launch (PDL) a kernel may start while its predecessor still
// runs and wait for it; that overlap is the predecessor's, so own time is what a kernel adds to the
// step, and the own times add up to the busy time exactly. Idle time is a gap: inside a step (the
// device waiting between two kernels of one graph) or between steps (the host preparing the next).
// Every gap is charged to the boundary it sits at: the kernel that ended last before it and the
// kernel that starts after it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/kernel_trace.h"
#include "core/status.h"

namespace frugal::bench {

// "void frugal::(anonymous namespace)::gemv_kernel<1, 4>(frugal::ops::MatmulParams)" ->
// "gemv_kernel<1, 4>": no return type, parameter list or frugal / anonymous namespaces.
std::string short_kernel_name(const std::string& name);

struct KernelTraceOptions {
  int64_t engine_steps = 1;  // steps the engine ran during the trace (the eager window's divisor)
  int top_kernels = 40;      // rows of the per-kernel table kept in the JSON
  int top_gaps = 15;         // boundaries kept in the gap table
};

// The accounting above as JSON: mode ("graph" | "eager"), steps, graph_launches, and per step:
// step_us, kernel_us (busy), gap_inside_us, gap_between_us, overlap_us (kernel durations summed
// minus busy: the PDL overlap), launches; kernels [{name, grid, block, launches, own_us,
// duration_us, mean_us, share}] by own time (per step); gaps [{after, before, us, count}] by time
// (per step); gap_histogram (counts per step of gaps < 1, 1-3, 3-10, >= 10 us). invalid_argument
// when there are no records or a record ends before it starts.
Result<nlohmann::json> analyze_kernel_trace(std::span<const KernelRecord> records, const KernelTraceOptions& opts);

// The Chrome / Perfetto trace-event JSON of the records (one "X" event per kernel, microseconds
// from the first record, one track per stream); in graph mode only the first `max_steps` graph
// launches of the window, so a long run stays a file one can open.
nlohmann::json chrome_trace(std::span<const KernelRecord> records, int max_steps);

// A picture of one analysis (self-contained SVG): the average step as one bar split into the
// top kernels' own time, the other kernels, the gaps inside steps and between them, with a legend;
// and under it the timeline of one step (the median graph replay and the gap after it, or the
// whole eager window), one lane per stream, kernels coloured as in the bar, gaps left blank.
std::string kernel_trace_svg(const std::string& title, std::span<const KernelRecord> records, const nlohmann::json& analysis);

// The terminal rendering of one analysis: the step line, the top `rows` kernels and gaps.
std::string format_kernel_trace(const std::string& title, const nlohmann::json& analysis, int rows);

}  // namespace frugal::bench
