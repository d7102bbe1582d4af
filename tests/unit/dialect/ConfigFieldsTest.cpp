//===- ConfigFieldsTest.cpp - One field table, every reader of it ---------===//
//
// The fields of KernelConfigFields.def reach the #qgemm.config attribute
// (printed, parsed back to the same value, whatever each field holds) and
// the C API (listed by name and kind, read by name, the same values the
// C++ configuration holds), with nothing written per field.
//
//===----------------------------------------------------------------------===//
#include "qgemm/ConfigField.h"
#include "qgemm/Dialect/QGemmDialect.h"
#include "qgemm/Kernels/ResolveConfig.h"
#include "qgemm/qgemm.h"

#include "support/Recipes.h"
#include "support/TestSupport.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/MLIRContext.h"

#include <catch2/catch.hpp>

#include <string>

using namespace qgemm;

namespace {

/// `base` with field `f` moved to another value it takes (and a cluster
/// of 2 where B is shared, which the attribute's verifier asks).
KernelConfig withOtherValue(const KernelConfig &base, const ConfigField &f) {
  KernelConfig cfg = base;
  const int64_t v = f.get(base);
  int64_t w = v;
  switch (f.codec.kind) {
  case FieldCodec::Kind::Integer:
    w = v == f.codec.hi ? f.codec.lo : f.codec.hi;
    break;
  case FieldCodec::Kind::Choice:
    w = v == f.codec.lo ? f.codec.hi : f.codec.lo;
    break;
  case FieldCodec::Kind::Word:
  case FieldCodec::Kind::Flag:
    w = !v;
    break;
  case FieldCodec::Kind::Family:
    w = (v + 1) % int64_t(std::size(EnumSpellings<KernelFamily>::spellings));
    break;
  }
  f.set(cfg, w);
  if (cfg.shareB && cfg.cluster < 2)
    cfg.cluster = 2;
  return cfg;
}

std::string printed(mlir::Attribute a) {
  std::string s;
  llvm::raw_string_ostream os(s);
  a.print(os);
  return s;
}

} // namespace

TEST_CASE("#qgemm.config prints and parses every field", "[config][fields]") {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::qgemm::QGemmDialect>();
  const KernelConfig base =
      resolveKernelConfig(testing::dsv3UpContract(), Tuning());
  // The spelling the lit tests and earlier builds print.
  const std::string text =
      printed(mlir::qgemm::KernelConfigAttr::get(&ctx, base));
  CHECK(text.rfind("#qgemm.config<wgmma, tile = [128, 192, 128], stages = ",
                   0) == 0);
  CHECK(text.find(", raster = \"n\", band = 4, cluster = 1, num_sms = 0, "
                  "scales_b = \"tile\", epilogue = \"staged\", smem = ") !=
        std::string::npos);
  for (const ConfigField &f : kConfigFields) {
    const KernelConfig cfg = withOtherValue(base, f);
    auto attr = mlir::qgemm::KernelConfigAttr::get(&ctx, cfg);
    const std::string s = printed(attr);
    INFO(f.name << ": " << s);
    mlir::Attribute back = mlir::parseAttribute(s, &ctx);
    REQUIRE(back);
    CHECK(back == attr);
    CHECK(mlir::cast<mlir::qgemm::KernelConfigAttr>(back).getValue() == cfg);
  }
}

TEST_CASE("the C API reads every field by name", "[config][fields][capi]") {
  testing::TempDir dir;
  qgemm_runtime_options o = QGEMM_RUNTIME_OPTIONS_INIT;
  o.cache_directory = dir.path.c_str();
  o.libcuda = testing::kNoDriver;
  qgemm_runtime *rt = nullptr;
  qgemm_spec *spec = nullptr;
  qgemm_kernel *k = nullptr;
  REQUIRE(qgemm_runtime_create(&o, &rt) == QGEMM_OK);
  REQUIRE(qgemm_spec_parse(R"({"qgemm": 1, "name": "fields",
    "op": "grouped_gemm",
    "grouping": {"kind": "m_contiguous", "alignment": 128, "index": "offsets"},
    "shape": {"n": 256, "k": 512},
    "a": {"dtype": "e4m3", "scale": {"block": [1, 128]}},
    "b": {"dtype": "e4m3", "scale": {"block": [128, 128]}},
    "d": {"dtype": "bf16"}})",
                           "fields.json", &spec) == QGEMM_OK);
  INFO(qgemm_last_error_message());
  REQUIRE(qgemm_compile(rt, spec, 0, &k) == QGEMM_OK);

  REQUIRE(qgemm_config_field_count() == int32_t(kNumConfigFields));
  CHECK(qgemm_config_field_name(-1) == nullptr);
  CHECK(qgemm_config_field_name(int32_t(kNumConfigFields)) == nullptr);
  CHECK(qgemm_config_field_kind(int32_t(kNumConfigFields)) == -1);
  qgemm_config_info info = {sizeof info};
  REQUIRE(qgemm_kernel_config(k, &info) == QGEMM_OK);
  for (int32_t i = 0; i < qgemm_config_field_count(); ++i) {
    const char *name = qgemm_config_field_name(i);
    REQUIRE(name != nullptr);
    CHECK(std::string(name) == kConfigFields[i].name);
    int64_t v = -1;
    CHECK(qgemm_kernel_config_field(k, name, &v) == QGEMM_OK);
    const int32_t kind = qgemm_config_field_kind(i);
    if (kind == QGEMM_CONFIG_FIELD_FAMILY)
      CHECK(v == info.family);
    else if (kind == QGEMM_CONFIG_FIELD_BOOL)
      CHECK((v == 0 || v == 1));
  }
  // The names qgemm_config_info has are its fields' values.
  auto field = [&](const char *name) {
    int64_t v = -1;
    CHECK(qgemm_kernel_config_field(k, name, &v) == QGEMM_OK);
    return v;
  };
  CHECK(field("family") == QGEMM_FAMILY_WGMMA);
  CHECK(field("block_n") == info.block_n);
  CHECK(field("stages") == info.stages);
  CHECK(field("n_fastest") == info.n_fastest);
  CHECK(field("raster_band") == info.raster_band);
  CHECK(field("scale_block_k") == info.scale_block_k);
  CHECK(field("shared_bytes") == info.shared_bytes);
  CHECK(field("share_b") == 0);

  int64_t v = 0;
  CHECK(qgemm_kernel_config_field(k, "warps", &v) == QGEMM_ERROR_USER);
  CHECK_THAT(qgemm_last_error_message(),
             Catch::Contains("no field \"warps\"; the fields: family, "
                             "block_m, block_n"));
  CHECK(qgemm_kernel_config_field(nullptr, "stages", &v) ==
        QGEMM_ERROR_INVALID_ARGUMENT);

  // qgemm_family numbers KernelFamilies.def.
  CHECK(std::string(qgemm_family_name(QGEMM_FAMILY_SIMT)) == "simt");
  CHECK(std::string(qgemm_family_name(QGEMM_FAMILY_WGMMA)) == "wgmma");
  const size_t families = std::size(EnumSpellings<KernelFamily>::spellings);
  for (size_t i = 0; i < families; ++i)
    CHECK(qgemm_family_name(qgemm_family(i)) ==
          toString(KernelFamily(i)));
  CHECK(std::string(qgemm_family_name(qgemm_family(families))) ==
        "<invalid>");

  qgemm_kernel_destroy(k);
  qgemm_spec_destroy(spec);
  qgemm_runtime_destroy(rt);
}
