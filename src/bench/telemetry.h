// GPU telemetry while a benchmark runs: NVML is loaded at run time (dlopen libnvidia-ml.so.1),
// so frugal neither links nor needs it; without it (no driver, CPU machine) the summary says
// {"available": false, "reason": ...} and the benchmark goes on.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace frugal::bench {

// One reading of one device. A negative value: the device did not report it.
struct GpuSample {
  double t_s = 0;  // since the sampler started
  double temperature_c = -1;
  double power_w = -1;
  double sm_clock_mhz = -1;
  double mem_clock_mhz = -1;
  double memory_used_gib = -1;
  double gpu_util_pct = -1;
  double energy_counter_j = -1;  // the driver's cumulative energy counter (Volta+), if any
};

// Where samples come from (NVML, or a scripted source in tests).
class TelemetrySource {
 public:
  virtual ~TelemetrySource() = default;
  virtual int device_count() const = 0;
  virtual std::string device_name(int i) const = 0;
  virtual GpuSample sample(int i) = 0;
};

// The NVML source, or nullptr with `reason` set (library missing, init failed, no devices).
std::unique_ptr<TelemetrySource> open_nvml(std::string* reason);

// Per-metric min / mean / max, energy in joules: the driver's energy counter difference when
// it has one, else the trapezoid integral of power over time.
nlohmann::json summarize_device(const std::string& name, const std::vector<GpuSample>& samples);

class TelemetrySampler {
 public:
  // `source` may be null (then only the reason is reported).
  TelemetrySampler(std::unique_ptr<TelemetrySource> source, std::string unavailable_reason,
                   std::chrono::milliseconds interval);
  // NVML if present, sampling every `interval`.
  static std::unique_ptr<TelemetrySampler> with_nvml(std::chrono::milliseconds interval = std::chrono::milliseconds(200));
  ~TelemetrySampler();
  void start();
  void stop();
  // {"available": bool, "reason"?, "interval_ms", "duration_s", "n_samples", "devices": [...],
  //  "energy_j" (all devices), "power_w_mean" (all devices)}
  nlohmann::json summary() const;
  bool available() const { return source_ != nullptr; }
  // Names of the devices ("NVIDIA H200"), empty without telemetry.
  std::vector<std::string> device_names() const;

 private:
  void loop();
  std::unique_ptr<TelemetrySource> source_;
  std::string reason_;
  std::chrono::milliseconds interval_;
  std::vector<std::vector<GpuSample>> samples_;  // per device
  mutable std::mutex mu_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::chrono::steady_clock::time_point t0_, t1_;
};

}  // namespace frugal::bench
