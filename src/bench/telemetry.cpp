#include "bench/telemetry.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <condition_variable>

namespace frugal::bench {

namespace {
using json = nlohmann::json;

// The few NVML entry points used, declared here so no NVML header is needed to build.
using nvmlReturn_t = int;
using nvmlDevice_t = struct NvmlDevice*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlUtilization {
  unsigned int gpu, memory;
};
constexpr int kNvmlSuccess = 0;
constexpr int kTemperatureGpu = 0;
constexpr int kClockSm = 1;
constexpr int kClockMem = 2;

class NvmlSource : public TelemetrySource {
 public:
  static std::unique_ptr<NvmlSource> open(std::string* reason) {
    // $FRUGAL_NVML_LIBRARY: a driver library outside the loader's path (WSL keeps it in
    // /usr/lib/wsl/lib), or a stand-in for tests.
    const char* env = std::getenv("FRUGAL_NVML_LIBRARY");
    const std::string path = env && *env ? env : "libnvidia-ml.so.1";
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      *reason = path + " not found (no NVIDIA driver): " + std::string(dlerror());
      return nullptr;
    }
    std::unique_ptr<NvmlSource> s(new NvmlSource(lib));
    if (!s->init_ || !s->shutdown_ || !s->count_ || !s->handle_) {
      *reason = "libnvidia-ml.so.1 lacks nvmlInit_v2 / nvmlDeviceGetCount_v2 / nvmlDeviceGetHandleByIndex_v2";
      return nullptr;
    }
    if (int rc = s->init_(); rc != kNvmlSuccess) {
      *reason = "nvmlInit_v2 failed with NVML error " + std::to_string(rc);
      return nullptr;
    }
    s->inited_ = true;
    unsigned int n = 0;
    if (s->count_(&n) != kNvmlSuccess || n == 0) {
      *reason = "NVML reports no GPU";
      return nullptr;
    }
    for (unsigned int i = 0; i < n; ++i) {
      nvmlDevice_t d = nullptr;
      if (s->handle_(i, &d) != kNvmlSuccess) continue;
      char name[96] = {0};
      if (!s->name_ || s->name_(d, name, sizeof(name)) != kNvmlSuccess) std::snprintf(name, sizeof(name), "GPU %u", i);
      s->devices_.push_back(d);
      s->names_.emplace_back(name);
    }
    if (s->devices_.empty()) {
      *reason = "NVML could not open any GPU";
      return nullptr;
    }
    return s;
  }
  ~NvmlSource() override {
    if (inited_) shutdown_();
    dlclose(lib_);
  }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  std::string device_name(int i) const override { return names_[static_cast<size_t>(i)]; }
  GpuSample sample(int i) override {
    GpuSample s;
    nvmlDevice_t d = devices_[static_cast<size_t>(i)];
    unsigned int u = 0;
    if (temp_ && temp_(d, kTemperatureGpu, &u) == kNvmlSuccess) s.temperature_c = u;
    if (power_ && power_(d, &u) == kNvmlSuccess) s.power_w = u / 1000.0;
    if (clock_ && clock_(d, kClockSm, &u) == kNvmlSuccess) s.sm_clock_mhz = u;
    if (clock_ && clock_(d, kClockMem, &u) == kNvmlSuccess) s.mem_clock_mhz = u;
    NvmlMemory m{};
    if (mem_ && mem_(d, &m) == kNvmlSuccess) s.memory_used_gib = static_cast<double>(m.used) / (1024.0 * 1024 * 1024);
    NvmlUtilization ut{};
    if (util_ && util_(d, &ut) == kNvmlSuccess) s.gpu_util_pct = ut.gpu;
    unsigned long long mj = 0;
    if (energy_ && energy_(d, &mj) == kNvmlSuccess) s.energy_counter_j = static_cast<double>(mj) / 1000.0;
    return s;
  }

 private:
  explicit NvmlSource(void* lib) : lib_(lib) {
    auto sym = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib_, name)); };
    sym(init_, "nvmlInit_v2");
    sym(shutdown_, "nvmlShutdown");
    sym(count_, "nvmlDeviceGetCount_v2");
    sym(handle_, "nvmlDeviceGetHandleByIndex_v2");
    sym(name_, "nvmlDeviceGetName");
    sym(temp_, "nvmlDeviceGetTemperature");
    sym(power_, "nvmlDeviceGetPowerUsage");
    sym(clock_, "nvmlDeviceGetClockInfo");
    sym(mem_, "nvmlDeviceGetMemoryInfo");
    sym(util_, "nvmlDeviceGetUtilizationRates");
    sym(energy_, "nvmlDeviceGetTotalEnergyConsumption");
  }
  void* lib_;
  bool inited_ = false;
  nvmlReturn_t (*init_)() = nullptr;
  nvmlReturn_t (*shutdown_)() = nullptr;
  nvmlReturn_t (*count_)(unsigned int*) = nullptr;
  nvmlReturn_t (*handle_)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name_)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*temp_)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*power_)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*clock_)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*mem_)(nvmlDevice_t, NvmlMemory*) = nullptr;
  nvmlReturn_t (*util_)(nvmlDevice_t, NvmlUtilization*) = nullptr;
  nvmlReturn_t (*energy_)(nvmlDevice_t, unsigned long long*) = nullptr;
  std::vector<nvmlDevice_t> devices_;
  std::vector<std::string> names_;
};

json min_mean_max(const std::vector<GpuSample>& ss, double GpuSample::*field) {
  double mn = 0, mx = 0, sum = 0;
  int n = 0;
  for (const auto& s : ss) {
    double v = s.*field;
    if (v < 0) continue;
    mn = n == 0 ? v : std::min(mn, v);
    mx = n == 0 ? v : std::max(mx, v);
    sum += v;
    ++n;
  }
  if (n == 0) return nullptr;
  return {{"min", mn}, {"mean", sum / n}, {"max", mx}};
}
}  // namespace

std::unique_ptr<TelemetrySource> open_nvml(std::string* reason) { return NvmlSource::open(reason); }

json summarize_device(const std::string& name, const std::vector<GpuSample>& ss) {
  json d = {{"name", name}, {"n_samples", ss.size()}, {"span_s", ss.empty() ? 0.0 : ss.back().t_s - ss.front().t_s}};
  d["temperature_c"] = min_mean_max(ss, &GpuSample::temperature_c);
  d["power_w"] = min_mean_max(ss, &GpuSample::power_w);
  d["sm_clock_mhz"] = min_mean_max(ss, &GpuSample::sm_clock_mhz);
  d["mem_clock_mhz"] = min_mean_max(ss, &GpuSample::mem_clock_mhz);
  d["memory_used_gib"] = min_mean_max(ss, &GpuSample::memory_used_gib);
  d["gpu_util_pct"] = min_mean_max(ss, &GpuSample::gpu_util_pct);
  double energy = 0;
  std::string source = "none";
  if (ss.size() >= 2 && ss.front().energy_counter_j >= 0 && ss.back().energy_counter_j >= 0) {
    energy = ss.back().energy_counter_j - ss.front().energy_counter_j;
    source = "energy counter";
  } else {
    for (size_t i = 1; i < ss.size(); ++i) {
      if (ss[i - 1].power_w < 0 || ss[i].power_w < 0) continue;
      energy += 0.5 * (ss[i - 1].power_w + ss[i].power_w) * (ss[i].t_s - ss[i - 1].t_s);
      source = "power integral";
    }
  }
  d["energy_j"] = energy;
  d["energy_source"] = source;
  return d;
}

TelemetrySampler::TelemetrySampler(std::unique_ptr<TelemetrySource> source, std::string unavailable_reason,
                                   std::chrono::milliseconds interval)
    : source_(std::move(source)), reason_(std::move(unavailable_reason)), interval_(interval) {
  if (source_) samples_.resize(static_cast<size_t>(source_->device_count()));
}

std::unique_ptr<TelemetrySampler> TelemetrySampler::with_nvml(std::chrono::milliseconds interval) {
  std::string reason;
  auto src = open_nvml(&reason);
  return std::make_unique<TelemetrySampler>(std::move(src), reason, interval);
}

TelemetrySampler::~TelemetrySampler() { stop(); }

void TelemetrySampler::start() {
  t0_ = t1_ = std::chrono::steady_clock::now();
  if (!source_ || thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { loop(); });
}

void TelemetrySampler::loop() {
  std::mutex m;
  std::condition_variable cv;
  auto next = t0_;
  while (!stop_) {
    auto now = std::chrono::steady_clock::now();
    double t = std::chrono::duration<double>(now - t0_).count();
    for (int i = 0; i < source_->device_count(); ++i) {
      GpuSample s = source_->sample(i);
      s.t_s = t;
      std::lock_guard<std::mutex> lk(mu_);
      samples_[static_cast<size_t>(i)].push_back(s);
    }
    next += interval_;
    std::unique_lock<std::mutex> lk(m);
    cv.wait_until(lk, next, [&] { return stop_.load(); });
  }
}

void TelemetrySampler::stop() {
  if (thread_.joinable()) {
    stop_ = true;
    thread_.join();
    // One last sample so the energy integral reaches the end of the run.
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    for (int i = 0; i < source_->device_count(); ++i) {
      GpuSample s = source_->sample(i);
      s.t_s = t;
      samples_[static_cast<size_t>(i)].push_back(s);
    }
  }
  t1_ = std::chrono::steady_clock::now();
}

json TelemetrySampler::summary() const {
  if (!source_) return {{"available", false}, {"reason", reason_}};
  std::lock_guard<std::mutex> lk(mu_);
  json j = {{"available", true}, {"interval_ms", interval_.count()},
            {"duration_s", std::chrono::duration<double>(t1_ - t0_).count()}};
  json devs = json::array();
  double energy = 0, power = 0;
  size_t n = 0;
  for (size_t i = 0; i < samples_.size(); ++i) {
    json d = summarize_device(source_->device_name(static_cast<int>(i)), samples_[i]);
    energy += d["energy_j"].get<double>();
    if (d["power_w"].is_object()) power += d["power_w"]["mean"].get<double>();
    n += samples_[i].size();
    devs.push_back(std::move(d));
  }
  j["n_samples"] = n;
  j["devices"] = std::move(devs);
  j["energy_j"] = energy;
  j["power_w_mean"] = power;
  return j;
}

std::vector<std::string> TelemetrySampler::device_names() const {
  std::vector<std::string> names;
  if (source_) {
    for (int i = 0; i < source_->device_count(); ++i) names.push_back(source_->device_name(i));
  }
  return names;
}

}  // namespace frugal::bench
