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
}

//===----------------------------------------------------------------------===//
// Enums. Spellings match the JSON spec and qgemm/Contract.h.
//===----------------------------------------------------------------------===//

def QGemm_ElemType : I32EnumAttr<"ElemType", "element type", [
    I32EnumAttrCase<"E4M3", 0, "e4m3">, I32EnumAttrCase<"E5M2", 1, "e5m2">,
    I32EnumAttrCase<"BF16", 2, "bf16">, I32EnumAttrCase<"F32", 3, "f32">,
    I32EnumAttrCase<"UE8M0", 4, "ue8m0">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::qgemm";
}
def QGemm_ScaleLayout : I32EnumAttr<"ScaleLayout", "scale layout", [
    I32EnumAttrCase<"Compact", 0, "COMPACT">,
    I32EnumAttrCase<"GemmReady", 1, "GEMM_READY">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::qgemm";
}
def QGemm_GroupingKind : I32EnumAttr<"GroupingKind", "grouping kind", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"MContiguous", 1, "m_contiguous">,
    I32EnumAttrCase<"MMasked", 2, "m_masked">,
    I32EnumAttrCase<"KContiguous", 3, "k_contiguous">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::qgemm";
}
def QGemm_GroupIndex : I32EnumAttr<"GroupIndex", "group index form", [
    I32EnumAttrCase<"None", 0, "none">, I32EnumAttrCase<"Offsets", 1, "offsets">,
    I32EnumAttrCase<"RowGroup", 2, "row_group">,
    I32EnumAttrCase<"MaskedM", 3, "masked_m">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::qgemm";
}
def QGemm_PaddingRows : I32EnumAttr<"PaddingRows", "padding rows policy", [
    I32EnumAttrCase<"Zero", 0, "zero">,
    I32EnumAttrCase<"Untouched", 1, "untouched">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::qgemm";
}
def QGemm_QuantRecipe : I32EnumAttr<"QuantRecipe", "quantizer recipe", [
    I32EnumAttrCase<"DeepSeek", 0, "deepseek">, I32EnumAttrCase<"TE", 1, "te">,
    I32EnumAttrCase<"MxFloor", 2, "mx_floor">,
    I32EnumAttrCase<"MxRceil", 3, "mx_rceil">]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::qgemm";
}

// Enum attributes print bare inside ops (`e4m3`, not `#qgemm.elem<e4m3>`).
class QGemm_EnumAttr<EnumAttrInfo info, string mnemonic>
    : EnumAttr<QGemm_Dialect, info, mnemonic> {
  let assemblyFormat = "`<` $value `>`";
}
def QGemm_ElemTypeAttr : QGemm_EnumAttr<QGemm_ElemType, "elem">;
def QGemm_PaddingRowsAttr : QGemm_EnumAttr<QGemm_PaddingRows, "padding">;
def QGemm_QuantRecipeAttr : QGemm_EnumAttr<QGemm_QuantRecipe, "recipe">;

//===----------------------------------------------------------------------===//
// Attributes.
//===----------------------------------------------------------------------===//

class QGemm_Attr<string name, string mnemonic_> : AttrDef<QGemm_Dialect, name> {
  let mnemonic = mnemonic_;
}

def QGemm_ScaleRecipeAttr : QGemm_Attr<"ScaleRecipe", "scale"> {
  let summary = "one scale per block of an operand, its type and layout";
  let description = [{
    `#qgemm.scale<[1, 128], f32, COMPACT>`: one f32 dequantization multiplier
    per 1 x 128 block, stored in the COMPACT layout of LAYOUTS.md.
  }];
  let parameters = (ins "int64_t":$blockRows, "int64_t":$blockCols,
                        EnumParameter<QGemm_ElemType>:$dtype,
                        EnumParameter<QGemm_ScaleLayout>:$layout);
  let assemblyFormat =
      "`<` `[` $blockRows `,` $blockCols `]` `,` $dtype `,` $layout `>`";
}

def QGemm_OperandAttr : QGemm_Attr<"Operand", "operand"> {
  let summary = "an FP8 operand and its scale recipe";
  let parameters = (ins EnumParameter<QGemm_ElemType>:$dtype,
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
  let parameters = (ins EnumParameter<QGemm_GroupingKind>:$kind,
                        "int64_t":$alignment,
                        EnumParameter<QGemm_GroupIndex>:$index);
  let assemblyFormat =
      "`<` $kind `,` `align` `=` $alignment `,` `index` `=` $index `>`";
}

#endif // QGEMM_DIALECT_TD
