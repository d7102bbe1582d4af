//===- CApi.cpp - qgemm.h over the C++ runtime ----------------------------===//
//
// Each C function converts its arguments, calls the C++ API, and turns a
// Status into a code plus the thread's last message. Nothing throws out of
// here: every entry point runs inside `guarded`, which reports a caught
// exception as QGEMM_ERROR_INTERNAL.
//
//===----------------------------------------------------------------------===//
#include "qgemm/qgemm.h"

#include "CApiInternal.h"
#include "ReservedSms.h"
#include "qgemm/CudaDriver.h"
#include "qgemm/ConfigField.h"
#include "qgemm/Kernels/GemmFamily.h"
#include "qgemm/Kernels/KernelABI.h"
#include "qgemm/Runtime.h"

#include <algorithm>
#include <cstddef>
#include <array>
#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

using namespace qgemm;

using namespace qgemm::capi;

//===----------------------------------------------------------------------===//
// Errors and versions
//===----------------------------------------------------------------------===//

const char *qgemm_last_error_message(void) {
  return lastError.message.c_str();
}

qgemm_status qgemm_last_error_code(void) { return lastError.code; }

const char *qgemm_status_name(qgemm_status s) {
  switch (s) {
  case QGEMM_OK: return "QGEMM_OK";
  case QGEMM_ERROR_USER: return "QGEMM_ERROR_USER";
  case QGEMM_ERROR_INTERNAL: return "QGEMM_ERROR_INTERNAL";
  case QGEMM_ERROR_SPEC: return "QGEMM_ERROR_SPEC";
  case QGEMM_ERROR_INVALID_ARGUMENT: return "QGEMM_ERROR_INVALID_ARGUMENT";
  case QGEMM_ERROR_NO_DEVICE: return "QGEMM_ERROR_NO_DEVICE";
  case QGEMM_ERROR_UNSUPPORTED: return "QGEMM_ERROR_UNSUPPORTED";
  }
  return "unknown";
}

int qgemm_api_version(void) { return QGEMM_API_VERSION; }

qgemm_status qgemm_set_reserved_sms(int32_t sms, int32_t *previous) {
  if (sms < 0 || sms > kMaxReservedSms)
    return fail(QGEMM_ERROR_INVALID_ARGUMENT,
                "qgemm_set_reserved_sms: sms = " + std::to_string(sms) +
                    " is out of range: expected 0.." +
                    std::to_string(kMaxReservedSms));
  const int32_t was = setReservedSms(sms);
  if (previous)
    *previous = was;
  return QGEMM_OK;
}

const char *qgemm_version_string(void) {
  static const std::string *v = new std::string(versionString());
  return v->c_str();
}

std::string qgemm::capi::cFieldNames(std::string_view message) {
  // The fields of GemmArgs and of the ops' args (Ops.def) whose C names
  // differ (qgemm.h's *_args structs).
  static const std::pair<std::string_view, std::string_view> kNames[] = {
      {"scaleA", "scale_a"},
      {"scaleB", "scale_b"},
      {"numGroups", "num_groups"},
      {"hostGroups", "host_groups"},
      {"hostGroupsCount", "host_groups_count"},
      {"errorFlag", "error_flag"},
#define QGEMM_FIELD(C_NAME, CPP_NAME) {#CPP_NAME, #C_NAME},
#define QGEMM_DEVICE_GROUPS
#define QGEMM_OP(NAME, KIND, C_OP, ARGS, FIRST_SIZE, VERSION, FIELDS) FIELDS
#include "qgemm/Ops.def"
  };
  auto isWordChar = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_';
  };
  std::string out;
  out.reserve(message.size() + 16);
  for (size_t i = 0; i < message.size();) {
    if (!isWordChar(message[i])) {
      out += message[i++];
      continue;
    }
    size_t end = i;
    while (end < message.size() && isWordChar(message[end]))
      ++end;
    std::string_view word = message.substr(i, end - i);
    std::string_view shown = word;
    for (const auto &[cpp, c] : kNames)
      if (word == cpp)
        shown = c;
    out += shown;
    i = end;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Runtime
//===----------------------------------------------------------------------===//

namespace {

/// A boolean of qgemm_runtime_options: 0 or 1, as documented; any other
/// value is more likely a field set from the wrong variable than "true".
qgemm_status runtimeFlag(const char *name, int32_t v, bool &out) {
  if (v != 0 && v != 1)
    return invalid("qgemm_runtime_create", std::string("options->") + name +
                                               " = " + std::to_string(v) +
                                               ": expected 0 or 1");
  out = v == 1;
  return QGEMM_OK;
}

} // namespace

qgemm_status qgemm_runtime_create(const qgemm_runtime_options *options,
                                  qgemm_runtime **out) {
  return guarded("qgemm_runtime_create", [&] {
    if (!out)
      return invalid("qgemm_runtime_create", "out is NULL");
    *out = nullptr;
    RuntimeOptions o;
    if (options) {
      if (!sizeOk(options, sizeof(qgemm_runtime_options)))
        return invalid("qgemm_runtime_create",
                       "options->struct_size = " +
                           std::to_string(options->struct_size) +
                           " is smaller than qgemm_runtime_options of API "
                           "1.0; set it to sizeof(qgemm_runtime_options)");
      if (qgemm_status st = runtimeFlag("disk_cache", options->disk_cache,
                                        o.diskCache))
        return st;
      if (qgemm_status st = runtimeFlag("load_eagerly",
                                        options->load_eagerly, o.loadEagerly))
        return st;
      if (options->device < 0)
        return invalid("qgemm_runtime_create",
                       "options->device = " + std::to_string(options->device) +
                           ": expected a device ordinal, 0 or more");
      if (options->cache_directory)
        o.cacheDirectory = options->cache_directory;
      o.device = options->device;
      if (options->libcuda)
        o.libcuda = options->libcuda;
    }
    *out = new qgemm_runtime(std::move(o));
    return QGEMM_OK;
  });
}

void qgemm_runtime_destroy(qgemm_runtime *rt) { destroyHandle(rt); }

const char *qgemm_runtime_cache_directory(const qgemm_runtime *rt) {
  Pin<qgemm_runtime> pin(rt);
  if (!pin) {
    invalid("qgemm_runtime_cache_directory", pin.why("rt"));
    return "";
  }
  return rt->rt.cacheDirectory().c_str();
}

//===----------------------------------------------------------------------===//
// Specs
//===----------------------------------------------------------------------===//

namespace {
qgemm_status wrapSpecs(SpecResult<std::vector<Spec>> r, qgemm_spec **out) {
  if (!r)
    return fromSpecError(r.error());
  *out = new qgemm_spec{std::move(r.value())};
  return QGEMM_OK;
}
} // namespace

qgemm_status qgemm_spec_parse(const char *json_text, const char *source_name,
                              qgemm_spec **out) {
  return guarded("qgemm_spec_parse", [&] {
    if (!out)
      return invalid("qgemm_spec_parse", "out is NULL");
    *out = nullptr;
    if (!json_text)
      return invalid("qgemm_spec_parse", "json_text is NULL");
    return wrapSpecs(parseSpecText(json_text, source_name ? source_name
                                                          : "<spec>"),
                     out);
  });
}

qgemm_status qgemm_spec_parse_file(const char *path, qgemm_spec **out) {
  return guarded("qgemm_spec_parse_file", [&] {
    if (!out)
      return invalid("qgemm_spec_parse_file", "out is NULL");
    *out = nullptr;
    if (!path)
      return invalid("qgemm_spec_parse_file", "path is NULL");
    return wrapSpecs(parseSpecFile(path), out);
  });
}

void qgemm_spec_destroy(qgemm_spec *spec) { destroyHandle(spec); }

size_t qgemm_spec_count(const qgemm_spec *spec) {
  Pin<qgemm_spec> pin(spec);
  if (!pin) {
    invalid("qgemm_spec_count", pin.why("spec"));
    return 0;
  }
  return spec->specs.size();
}

const char *qgemm_spec_name(const qgemm_spec *spec, size_t index) {
  Pin<qgemm_spec> pin(spec);
  if (!pin) {
    invalid("qgemm_spec_name", pin.why("spec"));
    return nullptr;
  }
  if (index >= spec->specs.size()) {
    invalid("qgemm_spec_name",
            "index " + std::to_string(index) + " is out of range: the spec "
            "has " + std::to_string(spec->specs.size()) + " kernel(s)");
    return nullptr;
  }
  return spec->specs[index].name.c_str();
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

qgemm_status qgemm_compile(qgemm_runtime *rt, const qgemm_spec *spec,
                           size_t index, qgemm_kernel **out) {
  return guarded("qgemm_compile", [&] {
    if (!out)
      return invalid("qgemm_compile", "out is NULL");
    *out = nullptr;
    Pin<qgemm_runtime> rtPin(rt);
    Pin<qgemm_spec> specPin(spec);
    if (!rtPin || !specPin)
      return invalid("qgemm_compile",
                     rtPin ? specPin.why("spec") : rtPin.why("rt"));
    if (index >= spec->specs.size())
      return invalid("qgemm_compile",
                     "index " + std::to_string(index) + " is out of range: " +
                         "the spec has " + std::to_string(spec->specs.size()) +
                         " kernel(s)");
    KernelResult r = rt->rt.getKernel(spec->specs[index]);
    if (r.kernel.valid())
      *out = new qgemm_kernel{r.kernel, r.stats};
    if (r.ok())
      return QGEMM_OK;
    // Without a kernel the compiler refused the spec: an op it parses but
    // cannot lower yet (the marker the pipeline itself tests, Pipeline.cpp),
    // else a spec problem (its messages name the field) unless it says
    // qgemm is at fault.
    if (!r.kernel.valid()) {
      qgemm_status code = QGEMM_ERROR_INTERNAL;
      if (r.status.code == Status::UserError)
        code = r.status.message.find("has no GPU lowering yet") !=
                       std::string::npos
                   ? QGEMM_ERROR_UNSUPPORTED
                   : QGEMM_ERROR_SPEC;
      return fail(code, r.status.message);
    }
    return fromStatus(r.status); // the eager module load
  });
}

void qgemm_kernel_destroy(qgemm_kernel *kernel) { destroyHandle(kernel); }

const char *qgemm_dtype_name(qgemm_dtype v) {
  switch (v) {
  case QGEMM_DTYPE_E4M3: return nameOf(ElemType::E4M3);
  case QGEMM_DTYPE_E5M2: return nameOf(ElemType::E5M2);
  case QGEMM_DTYPE_BF16: return nameOf(ElemType::BF16);
  case QGEMM_DTYPE_F32: return nameOf(ElemType::F32);
  case QGEMM_DTYPE_UE8M0: return nameOf(ElemType::UE8M0);
  }
  return "<invalid>";
}

const char *qgemm_scale_layout_name(qgemm_scale_layout v) {
  switch (v) {
  case QGEMM_SCALE_COMPACT: return nameOf(ScaleLayout::Compact);
  case QGEMM_SCALE_GEMM_READY: return nameOf(ScaleLayout::GemmReady);
  }
  return "<invalid>";
}

const char *qgemm_grouping_name(qgemm_grouping v) {
  switch (v) {
  case QGEMM_GROUPING_NONE: return nameOf(GroupingKind::None);
  case QGEMM_GROUPING_M_CONTIGUOUS: return nameOf(GroupingKind::MContiguous);
  case QGEMM_GROUPING_M_MASKED: return nameOf(GroupingKind::MMasked);
  case QGEMM_GROUPING_K_CONTIGUOUS: return nameOf(GroupingKind::KContiguous);
  }
  return "<invalid>";
}

const char *qgemm_group_index_name(qgemm_group_index v) {
  switch (v) {
  case QGEMM_GROUP_INDEX_NONE: return nameOf(GroupIndex::None);
  case QGEMM_GROUP_INDEX_OFFSETS: return nameOf(GroupIndex::Offsets);
  case QGEMM_GROUP_INDEX_ROW_GROUP: return nameOf(GroupIndex::RowGroup);
  case QGEMM_GROUP_INDEX_MASKED_M: return nameOf(GroupIndex::MaskedM);
  }
  return "<invalid>";
}

const char *qgemm_op_name(qgemm_op v) {
  switch (v) {
  case QGEMM_OP_GROUPED_GEMM: return "grouped_gemm";
#define QGEMM_FIELD(C_NAME, CPP_NAME)
#define QGEMM_DEVICE_GROUPS
#define QGEMM_OP(NAME, KIND, C_OP, ARGS, FIRST_SIZE, VERSION, FIELDS)          \
  case C_OP:                                                                   \
    return #NAME;
#include "qgemm/Ops.def"
  }
  return "<invalid>";
}

const char *qgemm_family_name(qgemm_family v) {
  // qgemm_family numbers the lines of KernelFamilies.def.
  const std::vector<const GemmFamily *> families = gemmFamilies();
  if (int(v) < 0 || size_t(v) >= families.size())
    return "<invalid>";
  return nameOf(families[size_t(v)]->id());
}

const char *qgemm_kernel_name(const qgemm_kernel *k) {
  return str("qgemm_kernel_name", k, [](const Kernel &x) -> const std::string & { return x.name(); });
}
const char *qgemm_kernel_spec_name(const qgemm_kernel *k) {
  return str("qgemm_kernel_spec_name", k, [](const Kernel &x) -> const std::string & {
    return x.spec().name;
  });
}
const char *qgemm_kernel_hash(const qgemm_kernel *k) {
  return str("qgemm_kernel_hash", k, [](const Kernel &x) -> const std::string & {
    return x.spec().hash;
  });
}
const char *qgemm_kernel_canonical_json(const qgemm_kernel *k) {
  return str("qgemm_kernel_canonical_json", k, [](const Kernel &x) -> const std::string & {
    return x.spec().canonicalJson;
  });
}
const char *qgemm_kernel_target(const qgemm_kernel *k) {
  return str("qgemm_kernel_target", k, [](const Kernel &x) -> const std::string & {
    return x.spec().target;
  });
}
const char *qgemm_kernel_ptx(const qgemm_kernel *k) {
  return str("qgemm_kernel_ptx", k, [](const Kernel &x) -> const std::string & { return x.ptx(); });
}
const char *qgemm_kernel_cache_note(const qgemm_kernel *k) {
  Pin<qgemm_kernel> pin(k);
  if (!pin) {
    invalid("qgemm_kernel_cache_note", pin.why("k"));
    return "";
  }
  return k->stats.cacheNote.c_str();
}

qgemm_kernel_source qgemm_kernel_source_of(const qgemm_kernel *k) {
  Pin<qgemm_kernel> pin(k);
  if (!pin) {
    invalid("qgemm_kernel_source_of", pin.why("k"));
    return QGEMM_SOURCE_INVALID;
  }
  switch (k->stats.source) {
  case KernelSource::MemoryHit: return QGEMM_SOURCE_MEMORY;
  case KernelSource::DiskHit: return QGEMM_SOURCE_DISK;
  case KernelSource::Compiled: return QGEMM_SOURCE_COMPILED;
  }
  return QGEMM_SOURCE_COMPILED;
}

qgemm_op qgemm_kernel_op(const qgemm_kernel *k) {
  Pin<qgemm_kernel> pin(k);
  const Kernel *kk = pin ? kernelOf(k) : nullptr;
  if (!kk) {
    invalid("qgemm_kernel_op", pin ? std::string("k holds no kernel")
                                   : pin.why("k"));
    return QGEMM_OP_INVALID;
  }
  switch (kk->spec().op) {
  case OpKind::GroupedGemm: return QGEMM_OP_GROUPED_GEMM;
#define QGEMM_FIELD(C_NAME, CPP_NAME)
#define QGEMM_DEVICE_GROUPS
#define QGEMM_OP(NAME, KIND, C_OP, ARGS, FIRST_SIZE, VERSION, FIELDS)          \
  case OpKind::KIND:                                                           \
    return C_OP;
#include "qgemm/Ops.def"
  }
  return QGEMM_OP_GROUPED_GEMM;
}

namespace {
/// A kernel's query into the caller's versioned `out` (a struct of API
/// 1.0): the kernel pinned, `out` large enough, with `gemmOnly` a
/// grouped_gemm kernel; then `body(kernel, o)` fills a zeroed Out, copied
/// as far as the caller's struct reaches (older callers).
template <typename Out, typename Body>
qgemm_status kernelInfo(const char *fn, const qgemm_kernel *k, Out *out,
                        const char *outType, bool gemmOnly, Body body) {
  return guarded(fn, [&] {
    Pin<qgemm_kernel> pin(k);
    const Kernel *kk = pin ? kernelOf(k) : nullptr;
    if (!kk)
      return invalid(fn, pin.why("kernel"));
    if (!sizeOk(out, sizeof(Out)))
      return invalid(fn, std::string("out is NULL or out->struct_size is "
                                     "smaller than sizeof(") +
                             outType + ") of API 1.0");
    if (gemmOnly && kk->spec().op != OpKind::GroupedGemm)
      return fail(QGEMM_ERROR_USER, std::string(fn) + ": " + kk->spec().name +
                                        " is not a grouped_gemm kernel");
    auto o = zeroed<Out>();
    if (qgemm_status st = body(*kk, o))
      return st;
    fillOut(out, o);
    return QGEMM_OK;
  });
}
} // namespace

qgemm_status qgemm_kernel_gemm_info(const qgemm_kernel *k,
                                    qgemm_gemm_info *out) {
  return kernelInfo("qgemm_kernel_gemm_info", k, out, "qgemm_gemm_info", true,
                    [](const Kernel &kk, qgemm_gemm_info &i) {
                      const GemmContract &c = kk.spec().gemm;
                      i.grouping = cGrouping(c.grouping.kind);
                      i.group_index = cGroupIndex(c.grouping.index);
                      i.alignment = c.grouping.alignment;
                      i.n = c.n;
                      i.k = c.k;
                      i.a_dtype = cDtype(c.a.dtype);
                      i.b_dtype = cDtype(c.b.dtype);
                      i.d_dtype = cDtype(c.d);
                      i.accumulate = c.accumulate ? 1 : 0;
                      i.a_scale = cScale(c.a.scale);
                      i.b_scale = cScale(c.b.scale);
                      i.padding_rows_zero =
                          c.paddingRows == PaddingRows::Zero ? 1 : 0;
                      return QGEMM_OK;
                    });
}

qgemm_status qgemm_kernel_config(const qgemm_kernel *k,
                                 qgemm_config_info *out) {
  return kernelInfo("qgemm_kernel_config", k, out, "qgemm_config_info", false,
                    [](const Kernel &kk, qgemm_config_info &i) {
                      const KernelConfig &cfg = kk.config();
                      i.family = int32_t(cfg.family);
                      i.block_m = cfg.blockM;
                      i.block_n = cfg.blockN;
                      i.block_k = cfg.blockK;
                      i.stages = cfg.stages;
                      i.threads = cfg.threads;
                      i.cluster = cfg.cluster;
                      i.n_fastest = cfg.nFastest ? 1 : 0;
                      i.raster_band = cfg.rasterBand;
                      i.scale_block_k = cfg.scaleBlockK;
                      i.num_sms = cfg.numSms;
                      i.shared_bytes = cfg.sharedBytes;
                      return QGEMM_OK;
                    });
}

// The configuration field by field: the table of KernelConfigFields.def,
// so a field added there is readable here without a change to this file.

int32_t qgemm_config_field_count(void) { return int32_t(kNumConfigFields); }

const char *qgemm_config_field_name(int32_t index) {
  return index >= 0 && size_t(index) < kNumConfigFields
             ? kConfigFields[index].name
             : nullptr;
}

int32_t qgemm_config_field_kind(int32_t index) {
  if (index < 0 || size_t(index) >= kNumConfigFields)
    return -1;
  const ConfigField &f = kConfigFields[index];
  if (f.codec.kind == FieldCodec::Kind::Family)
    return QGEMM_CONFIG_FIELD_FAMILY;
  return f.isWord() ? QGEMM_CONFIG_FIELD_BOOL : QGEMM_CONFIG_FIELD_INT;
}

qgemm_status qgemm_kernel_config_field(const qgemm_kernel *k, const char *name,
                                       int64_t *value) {
  return guarded("qgemm_kernel_config_field", [&] {
    const char *fn = "qgemm_kernel_config_field";
    Pin<qgemm_kernel> pin(k);
    const Kernel *kk = pin ? kernelOf(k) : nullptr;
    if (!kk)
      return invalid(fn, pin.why("kernel"));
    if (!name || !value)
      return invalid(fn, "name and value must not be NULL");
    const ConfigField *f = findConfigField(name);
    if (!f) {
      std::string names;
      for (const ConfigField &g : kConfigFields)
        names += (names.empty() ? "" : ", ") + std::string(g.name);
      return fail(QGEMM_ERROR_USER, std::string(fn) + ": no field \"" + name +
                                        "\"; the fields: " + names);
    }
    *value = f->get(kk->config());
    return QGEMM_OK;
  });
}

qgemm_status qgemm_kernel_launch_geometry(const qgemm_kernel *k, int64_t rows,
                                          int64_t num_groups,
                                          int64_t resident_ctas,
                                          qgemm_launch_geometry *out) {
  const char *fn = "qgemm_kernel_launch_geometry";
  return kernelInfo(
      fn, k, out, "qgemm_launch_geometry", true,
      [&](const Kernel &kk, qgemm_launch_geometry &g) {
        if (rows < 0 || rows > kMaxDim)
          return fail(QGEMM_ERROR_USER, std::string(fn) +
                                            ": rows = " + std::to_string(rows) +
                                            " is out of range: expected 0.." +
                                            std::to_string(kMaxDim));
        if (num_groups < 1 || num_groups > kMaxGroups)
          return fail(QGEMM_ERROR_USER, std::string(fn) + ": num_groups = " +
                                            std::to_string(num_groups) +
                                            " is out of range: expected 1.." +
                                            std::to_string(kMaxGroups));
        const KernelConfig &cfg = kk.config();
        const GemmFamily &family = gemmFamily(cfg.family);
        if (family.persistent() && resident_ctas < 1)
          return fail(QGEMM_ERROR_USER,
                      std::string(fn) +
                          ": resident_ctas = " + std::to_string(resident_ctas) +
                          " must be >= 1 (the device's SM count) for the "
                          "persistent " +
                          std::string(family.name()) + " kernel");
        const LaunchShape shape = family.launchShape(kk.spec().gemm, cfg, rows,
                                                     num_groups, resident_ctas);
        for (int i = 0; i < 3; ++i) {
          g.grid[i] = shape.grid[i];
          g.block[i] = shape.block[i];
        }
        g.cluster = shape.cluster;
        g.shared_bytes = shape.sharedBytes;
        return QGEMM_OK;
      });
}

qgemm_status qgemm_kernel_scale_elements(const qgemm_kernel *k, int64_t rows,
                                         int64_t num_groups,
                                         const int32_t *host_groups,
                                         int64_t *scale_a_elems,
                                         int64_t *scale_b_elems) {
  return guarded("qgemm_kernel_scale_elements", [&] {
    const char *fn = "qgemm_kernel_scale_elements";
    Pin<qgemm_kernel> pin(k);
    const Kernel *kk = pin ? kernelOf(k) : nullptr;
    if (!kk)
      return invalid(fn, pin.why("kernel"));
    if (!scale_a_elems || !scale_b_elems)
      return invalid(fn, "scale_a_elems or scale_b_elems is NULL");
    if (kk->spec().op != OpKind::GroupedGemm)
      return fail(QGEMM_ERROR_USER, std::string(fn) + ": " + kk->spec().name +
                                        " is not a grouped_gemm kernel");
    const GemmContract &c = kk->spec().gemm;
    GemmArgs a;
    a.rows = rows;
    a.numGroups = num_groups;
    a.hostGroups = host_groups;
    a.hostGroupsCount = host_groups ? num_groups : 0;
    // The sizes are only meaningful for arguments a launch would accept:
    // the host offsets are validated as a launch validates them.
    if (rows < 0 || rows > kMaxDim || num_groups < 1 ||
        num_groups > kMaxGroups)
      return fail(QGEMM_ERROR_USER,
                  std::string(fn) + ": rows = " + std::to_string(rows) +
                      ", num_groups = " + std::to_string(num_groups) +
                      ": expected rows in 0.." + std::to_string(kMaxDim) +
                      " and num_groups in 1.." + std::to_string(kMaxGroups));
    if (c.grouping.kind == GroupingKind::KContiguous && restartsTokenBlocks(c)) {
      if (!host_groups)
        return fail(QGEMM_ERROR_USER,
                    std::string(fn) + ": " + kk->spec().name +
                        " restarts its token scale blocks at each group: "
                        "the host offsets are needed to size its scales");
      GemmArgs check = a;
      check.a = check.b = check.d = check.groups = 16; // pointers are not the point
      check.scaleA = check.scaleB = 16;
      check.c = 16;
      if (Status st = validateGemmArgs(c, check); !st.ok())
        return fromStatus(st);
    }
    int64_t sa = scaleElements(c, a, ScaleOperand::A);
    int64_t sb = scaleElements(c, a, ScaleOperand::B);
    if (sa < 0 || sb < 0)
      return fail(QGEMM_ERROR_INTERNAL,
                  std::string(fn) + ": no scale layout for " + kk->spec().name);
    *scale_a_elems = sa;
    *scale_b_elems = sb;
    return QGEMM_OK;
  });
}

//===----------------------------------------------------------------------===//
// Launch
//===----------------------------------------------------------------------===//

qgemm_status qgemm_launch_gemm(qgemm_runtime *rt, const qgemm_kernel *k,
                               const qgemm_gemm_args *args, void *stream) {
  return guarded("qgemm_launch_gemm", [&] {
    const char *fn = "qgemm_launch_gemm";
    Pin<qgemm_runtime> rtPin(rt);
    Pin<qgemm_kernel> pin(k);
    const Kernel *kk = pin ? kernelOf(k) : nullptr;
    if (!rtPin || !kk)
      return invalid(fn, rtPin ? pin.why("kernel") : rtPin.why("rt"));
    if (!sizeOk(args, offsetof(qgemm_gemm_args, flags)))
      return invalid(fn, "args is NULL or args->struct_size is smaller than "
                         "sizeof(qgemm_gemm_args) of API 1.0");
    if (kk->spec().op != OpKind::GroupedGemm)
      return fail(QGEMM_ERROR_USER,
                  std::string(fn) + ": " + kk->spec().name + " is a " +
                      qgemm_op_name(qgemm_kernel_op(k)) +
                      " kernel, not a grouped_gemm kernel");
    GemmArgs a;
    a.a = args->a;
    a.scaleA = args->scale_a;
    a.b = args->b;
    a.scaleB = args->scale_b;
    a.d = args->d;
    a.c = args->c;
    a.groups = args->groups;
    a.rows = args->rows;
    a.numGroups = args->num_groups;
    a.hostGroups = args->host_groups;
    a.hostGroupsCount = args->host_groups_count;
    // 1.2 fields, read only when the caller's struct has them.
    if (args->struct_size >= offsetof(qgemm_gemm_args, workspace) +
                                 sizeof(args->workspace)) {
      if (qgemm_status st =
              launchFlags(fn, args->flags, a.deviceGroups, a.debugSync))
        return st;
      a.errorFlag = args->error_flag;
      a.workspace = args->workspace;
    }
    return fromStatus(rt->rt.launch(*kk, a, stream));
  });
}

const char *qgemm_group_error_string(int32_t error_word) {
  static thread_local std::string text;
  text = groupErrorString(error_word);
  return text.c_str();
}

qgemm_status qgemm_kernel_load(qgemm_runtime *rt, const qgemm_kernel *k) {
  return guarded("qgemm_kernel_load", [&] {
    Pin<qgemm_runtime> rtPin(rt);
    Pin<qgemm_kernel> pin(k);
    const Kernel *kk = pin ? kernelOf(k) : nullptr;
    if (!rtPin || !kk)
      return invalid("qgemm_kernel_load",
                     rtPin ? pin.why("kernel") : rtPin.why("rt"));
    return fromStatus(rt->rt.load(*kk));
  });
}
