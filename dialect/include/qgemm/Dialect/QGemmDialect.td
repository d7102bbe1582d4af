//===- QGemmDialect.td - The qgemm dialect and its attributes ----*- tablegen -*-===//
//
// The `qgemm` dialect states what a quantized kernel computes and the data
// contracts of its operands (LAYOUTS.md); codegen turns each op into one
// NVVM/LLVM kernel.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_DIALECT_TD
#define QGEMM_DIALECT_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"

def QGemm_Dialect : Dialect {
  let name = "qgemm";
  let cppNamespace = "::mlir::qgemm";
  let summary = "Quantized (FP8 / MXFP8, block-scaled) grouped GEMM kernels";
  let description = [{
    Ops of this dialect are kernel declarations: a symbol plus the contract
    of its operands (element types, scale recipes and layouts, grouping).
    Verifiers enforce the rules of LAYOUTS.md through qgemm::checkGemm and
    qgemm::checkQuantize, the same code that validates JSON specs.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
}

//===----------------------------------------------------------------------===//
// Attributes.
//===----------------------------------------------------------------------===//

class QGemm_Attr<string name, string mnemonic_> : AttrDef<QGemm_Dialect, name> {
  let mnemonic = mnemonic_;
}

// The contract's enums are qgemm/Contract.h's C++ enums, defined once there
// with their spellings (EnumSpellings); the dialect declares no enums of its
// own. Such a parameter parses and prints through that table
// (QGemmDialect.h).
class QGemm_EnumParameter<string cppEnum>
    : AttrParameter<"::qgemm::" # cppEnum, "qgemm::" # cppEnum>;

// An enum on its own prints bare inside ops (`d = <bf16>`).
class QGemm_EnumAttr<string name, string mnemonic_>
    : QGemm_Attr<name, mnemonic_> {
  let parameters = (ins QGemm_EnumParameter<name>:$value);
  let assemblyFormat = "`<` $value `>`";
}
def QGemm_ElemTypeAttr : QGemm_EnumAttr<"ElemType", "elem">;
def QGemm_PaddingRowsAttr : QGemm_EnumAttr<"PaddingRows", "padding">;
def QGemm_QuantRecipeAttr : QGemm_EnumAttr<"QuantRecipe", "recipe">;

def QGemm_ScaleRecipeAttr : QGemm_Attr<"ScaleRecipe", "scale"> {
  let summary = "one scale per block of an operand, its type and layout";
  let description = [{
    `#qgemm.scale<[1, 128], f32, COMPACT>`: one f32 dequantization multiplier
    per 1 x 128 block, stored in the COMPACT layout of LAYOUTS.md.
  }];
  let parameters = (ins "int64_t":$blockRows, "int64_t":$blockCols,
                        QGemm_EnumParameter<"ElemType">:$dtype,
                        QGemm_EnumParameter<"ScaleLayout">:$layout);
  let assemblyFormat =
      "`<` `[` $blockRows `,` $blockCols `]` `,` $dtype `,` $layout `>`";
}

def QGemm_OperandAttr : QGemm_Attr<"Operand", "operand"> {
  let summary = "an FP8 operand and its scale recipe";
  let parameters = (ins QGemm_EnumParameter<"ElemType">:$dtype,
                        "ScaleRecipeAttr":$scale);
  let assemblyFormat = "`<` $dtype `,` qualified($scale) `>`";
}

def QGemm_GroupingAttr : QGemm_Attr<"Grouping", "grouping"> {
  let summary = "how tokens are grouped by expert";
  let description = [{
    `#qgemm.grouping<m_contiguous, align = 128, index = offsets>`: groups of
    rows stored one after another, each padded to 128 rows, described at run
    time by cumulative end rows.
  }];
  let parameters = (ins QGemm_EnumParameter<"GroupingKind">:$kind,
                        "int64_t":$alignment,
                        QGemm_EnumParameter<"GroupIndex">:$index);
  let assemblyFormat =
      "`<` $kind `,` `align` `=` $alignment `,` `index` `=` $index `>`";
}

def QGemm_TuningAttr : QGemm_Attr<"Tuning", "tuning"> {
  let summary = "what a spec asks of a kernel's build and launch";
  let description = [{
    The spec's explicit `tuning` object (qgemm/Tuning.h); absent means
    "auto". 0 and "auto" leave one field to the heuristic.
    `#qgemm.tuning<block_m = 0, block_n = 192, stages = 4, cluster = 1,
    multicast = "none", num_sms = 0, raster = "n">`; a family, a
    promotion and scale loads other than "auto" follow the raster, in that
    order: `..., raster = "auto", family = "simt">`, `..., raster = "n",
    promotion = "deferred", scale_loads = "wide">` (QGemmDialect.cpp prints
    and parses the tail).
  }];
  let parameters = (ins "int64_t":$blockM, "int64_t":$blockN,
                        "int64_t":$stages, "int64_t":$cluster,
                        StringRefParameter<>:$multicast, "int64_t":$numSms,
                        StringRefParameter<>:$raster,
                        StringRefParameter<"kernel family", "\"auto\"">:$family,
                        StringRefParameter<"promotion schedule", "\"auto\"">:$promotion,
                        StringRefParameter<"scale loads", "\"auto\"">:$scaleLoads);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    ::qgemm::Tuning getValue() const;
    static TuningAttr get(::mlir::MLIRContext *ctx, const ::qgemm::Tuning &t);
  }];
}

def QGemm_KernelConfigAttr : QGemm_Attr<"KernelConfig", "config"> {
  let summary = "the configuration a kernel is built and launched with";
  let description = [{
    Resolved once, from the contract and the tuning request, by
    `qgemm-resolve-config` (the family's GemmFamily object); the lowering
    only reads it. Its one parameter is the qgemm::KernelConfig itself; the
    printer, parser and verifier walk the field table of
    KernelConfigFields.def (dialect/lib/KernelConfigAttr.cpp), so a new
    field needs no change here.
    `#qgemm.config<wgmma, tile = [128, 192, 128], stages = 4, threads = 384,
    raster = "n", band = 4, cluster = 1, num_sms = 0, scales_b = "tile",
    epilogue = "staged", smem = 217216>`; a field that is only written when
    it differs from its default follows where it does: MXFP8 kernels add
    `scale_k = 32`, clusters sharing B `multicast = "b"`.
  }];
  let parameters = (ins
      AttrParameter<"::qgemm::KernelConfig", "the resolved configuration">:$value);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // QGEMM_DIALECT_TD
