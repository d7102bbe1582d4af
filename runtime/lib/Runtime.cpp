//===- Runtime.cpp - getKernel: memory, disk, compile ---------------------===//
//
// Three tiers, cheapest first: this runtime's map of kernel identities, the
// shared disk cache, the compiler. The disk cache is an optimization only: a
// directory that cannot be written or an entry that does not verify is
// reported in KernelStats::cacheNote, never as a failure of getKernel.
//
//===----------------------------------------------------------------------===//
#include "RuntimeImpl.h"

#include "qgemm/Kernels/ResolveConfig.h"

#include <chrono>
#include <cstdlib>
#include <iostream>

using namespace qgemm;

namespace {

double millisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

/// Crashed writers leave temporaries; live ones finish in seconds.
constexpr int64_t kStaleTemporarySeconds = 3600;

std::string metadataJson(const Spec &spec, const CompileOutput &out) {
  // Only for people looking at the directory; never parsed back.
  std::string json = "{\"spec\":" + spec.canonicalJson + ",\"kernel\":\"" +
                     out.kernelName + "\",\"compiler\":\"" + versionString() +
                     "\",\"compile_ms\":" + std::to_string(out.millis) + "}";
  return json;
}

} // namespace

//===----------------------------------------------------------------------===//
// Kernel
//===----------------------------------------------------------------------===//

namespace {
const Kernel::State &emptyState() {
  static const Kernel::State *s = new Kernel::State();
  return *s;
}
} // namespace

const Spec &Kernel::spec() const {
  return (state ? *state : emptyState()).spec;
}
const std::string &Kernel::name() const {
  return (state ? *state : emptyState()).name;
}
const std::string &Kernel::ptx() const {
  return (state ? *state : emptyState()).ptx;
}
const std::string &Kernel::cacheKey() const {
  return (state ? *state : emptyState()).key;
}
const KernelConfig &Kernel::config() const {
  return (state ? *state : emptyState()).config;
}
bool Kernel::isLoaded() const {
  if (!state)
    return false;
  std::lock_guard<std::mutex> lock(state->mutex);
  return !state->modules.empty();
}

Kernel::State::~State() {
  if (!driver)
    return;
  // cuModuleUnload acts on the module's context; make it current briefly.
  CUcontext saved = nullptr;
  driver->ctxGetCurrent(&saved);
  for (const Module &m : modules) {
    driver->ctxSetCurrent(m.context);
    driver->moduleUnload(m.module); // Errors (context gone at exit) are moot.
    if (m.checkModule)
      driver->moduleUnload(m.checkModule);
  }
  driver->ctxSetCurrent(saved);
}

std::string_view qgemm::toString(KernelSource s) {
  switch (s) {
  case KernelSource::MemoryHit:
    return "memory hit";
  case KernelSource::DiskHit:
    return "disk hit";
  case KernelSource::Compiled:
    return "compiled";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// Runtime
//===----------------------------------------------------------------------===//

Runtime::Runtime() : Runtime(RuntimeOptions()) {}

Runtime::Runtime(RuntimeOptions options) : impl(std::make_unique<Impl>()) {
  impl->options = std::move(options);
  impl->cacheDirectory = impl->options.cacheDirectory.empty()
                             ? defaultCacheDirectory()
                             : impl->options.cacheDirectory;
  if (impl->options.diskCache && !impl->cacheDirectory.empty()) {
    impl->disk = std::make_unique<KernelCache>(impl->cacheDirectory);
    impl->disk->removeStaleTemporaries(kStaleTemporarySeconds);
  }
}

Runtime::~Runtime() = default;

const std::string &Runtime::cacheDirectory() const {
  return impl->cacheDirectory;
}

CacheStats Runtime::cacheStats() const {
  return impl->disk ? impl->disk->stats() : CacheStats();
}

void Runtime::clearMemoryCache() {
  std::lock_guard<std::mutex> lock(impl->slotsMutex);
  impl->slots.clear();
}

Status Runtime::Impl::openDriver(const CudaDriver *&out) {
  out = driver.load(std::memory_order_acquire);
  if (out)
    return Status();
  Status st = openCudaDriver(options.libcuda, out);
  if (st.ok())
    driver.store(out, std::memory_order_release);
  return st;
}

Status Runtime::openDriver(const CudaDriver *&out) {
  return impl->openDriver(out);
}

std::shared_ptr<const AutoTuning> Runtime::Impl::autoTuning(const Spec &spec) {
  std::lock_guard<std::mutex> lock(tuningMutex);
  auto &slot = tuned[spec.hash];
  if (slot)
    return slot;
  if (!tuningGpuKnown && options.consultTuningDb) {
    tuningGpuKnown = true;
    // The device's name, architecture and SM count; none without a driver
    // or a device (compile-only use), and then no database is consulted
    // unless QGEMM_TUNING_GPU names the GPU.
    const CudaDriver *d = nullptr;
    CUdevice dev = 0;
    char name[256] = {0};
    int major = 0, minor = 0, sms = 0;
    if (openDriver(d).ok() && d->deviceGet(&dev, options.device) == 0 &&
        d->deviceGetName(name, sizeof(name) - 1, dev) == 0) {
      tuningGpu.name = name;
      if (d->deviceGetAttribute(
              &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == 0 &&
          d->deviceGetAttribute(
              &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) == 0 &&
          d->deviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                dev) == 0) {
        tuningGpu.arch = archName(major, minor);
        tuningGpu.sms = sms;
      }
    }
  }
  TuningContext ctx = tuningContextFromEnv(tuningGpu, versionString());
  if (!options.consultTuningDb) {
    ctx.heuristicOnly = true;
    ctx.heuristicWhy = "RuntimeOptions::consultTuningDb off";
  }
  auto r = std::make_shared<AutoTuning>(resolveAutoTuning(spec, ctx));
  // Entries skipped for another GPU or qgemm version: said once per process
  // on stderr when QGEMM_VERBOSE is set (always in AutoTuning::notes,
  // qgemmc explain).
  static std::once_flag warned;
  const char *verbose = std::getenv("QGEMM_VERBOSE");
  if (!r->notes.empty() && verbose && *verbose && std::string(verbose) != "0")
    std::call_once(warned, [&] {
      for (const std::string &n : r->notes)
        std::cerr << "qgemm: tuning database: " << n << "\n";
    });
  slot = r;
  return slot;
}

KernelResult Runtime::getKernel(const Spec &requested) {
  auto start = std::chrono::steady_clock::now();
  KernelResult r;
  std::shared_ptr<const AutoTuning> tuning;
  if (requested.op == OpKind::GroupedGemm)
    tuning = impl->autoTuning(requested);
  const Spec &spec = tuning ? tuning->spec : requested;
  if (tuning)
    r.stats.tuningSource = tuning->detail;
  std::string identity = kernelIdentity(spec);
  std::string key = stableHash(identity);
  r.stats.cacheKey = key;

  std::shared_ptr<Impl::Slot> slot;
  {
    std::lock_guard<std::mutex> lock(impl->slotsMutex);
    std::shared_ptr<Impl::Slot> &s = impl->slots[key];
    if (!s)
      s = std::make_shared<Impl::Slot>();
    slot = s;
  }
  std::lock_guard<std::mutex> lock(slot->mutex);
  if (slot->kernel) {
    r.kernel.state = slot->kernel;
    r.stats.source = KernelSource::MemoryHit;
    r.stats.millis = millisSince(start);
    return r;
  }

  auto state = std::make_shared<Kernel::State>();
  state->spec = spec;
  state->key = key;
  CacheEntry entry;
  KernelCache::Lookup found = KernelCache::Lookup::Miss;
  if (impl->disk)
    found = impl->disk->load(key, identity, entry, &r.stats.cacheNote);
  // The stored configuration is the one the PTX was built with; one that
  // does not decode or does not fit its family is a damaged entry.
  if (found == KernelCache::Lookup::Hit && spec.op == OpKind::GroupedGemm) {
    std::string why;
    std::optional<KernelConfig> cfg = decodeConfig(entry.config, &why);
    if (cfg && (why = checkConfigConsistent(spec.gemm, *cfg)).empty()) {
      state->config = *cfg;
    } else {
      found = KernelCache::Lookup::Rejected;
      r.stats.cacheNote = why;
    }
  }
  if (found == KernelCache::Lookup::Hit) {
    r.stats.source = KernelSource::DiskHit;
    state->name = std::move(entry.kernelName);
    state->ptx = std::move(entry.ptx);
  } else {
    CompileOutput out;
    if (Status st = compileSpec(spec, Emit::PTX, out); !st.ok()) {
      r.status = st;
      r.stats.millis = millisSince(start);
      return r;
    }
    r.stats.source = KernelSource::Compiled;
    r.stats.compileMillis = out.millis;
    if (found == KernelCache::Lookup::Rejected)
      r.stats.cacheNote = "rejected " + r.stats.cacheNote + "; rebuilt";
    if (out.config)
      state->config = *out.config;
    if (impl->disk) {
      CacheEntry fresh{out.kernelName, out.ptx, identity,
                       metadataJson(spec, out),
                       out.config ? encodeConfig(*out.config) : ""};
      std::string moved;
      Status st = impl->disk->store(key, fresh, &moved);
      if (!moved.empty())
        r.stats.cacheNote += (r.stats.cacheNote.empty() ? "" : "; ") + moved;
      if (!st.ok())
        r.stats.cacheNote += (r.stats.cacheNote.empty() ? "" : "; ") +
                             std::string("not cached: ") + st.message;
    }
    state->name = std::move(out.kernelName);
    state->ptx = std::move(out.ptx);
  }
  slot->kernel = state;
  r.kernel.state = state;

  // Compile-only use (no driver) is fine; a driver that is there but cannot
  // load the kernel is an error worth reporting now.
  const CudaDriver *driver = nullptr;
  if (impl->options.loadEagerly && impl->openDriver(driver).ok()) {
    auto loadStart = std::chrono::steady_clock::now();
    Kernel::State::Module m;
    r.status = impl->functionFor(*state, m);
    r.stats.loadMillis = millisSince(loadStart);
  }
  r.stats.millis = millisSince(start);
  return r;
}
