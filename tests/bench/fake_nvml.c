/* A stand-in for libnvidia-ml.so.1 with the entry points frugal's telemetry uses and the C
 * signatures of nvml.h: two GPUs with fixed readings, and an energy counter that advances
 * 1000 mJ per read. Loaded through $FRUGAL_NVML_LIBRARY by serve_unit_test. */
#include <stdio.h>
#include <string.h>

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;

static struct nvmlDevice_st {
  int index;
  unsigned long long energy_mj;
} devices[2] = {{0, 5000}, {1, 9000}};

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int* n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* d) {
  if (i >= 2) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  *d = &devices[i];
  return 0;
}
int nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned int len) {
  snprintf(name, len, "Fake GPU %d", d->index);
  return 0;
}
int nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int* t) {
  if (sensor != 0) return 2;
  *t = 60 + (unsigned)d->index;
  return 0;
}
int nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int* mw) { *mw = 250000 + 50000 * (unsigned)d->index; return 0; }
int nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int* mhz) {
  if (type == 1) *mhz = 1980; /* SM */
  else if (type == 2) *mhz = 2619; /* memory */
  else return 2;
  return 0;
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  m->total = 141ull << 30;
  m->used = 10ull << 30;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) { u->gpu = 97; u->memory = 40; return 0; }
int nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long* mj) {
  d->energy_mj += 1000;
  *mj = d->energy_mj;
  return 0;
}
