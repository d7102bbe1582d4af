//===- QGemmOps.td - qgemm kernel declarations -------------------*- tablegen -*-===//
#ifndef QGEMM_OPS_TD
#define QGEMM_OPS_TD

include "qgemm/Dialect/QGemmDialect.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"

class QGemm_Op<string mnemonic, list<Trait> traits = []>
    : Op<QGemm_Dialect, mnemonic, traits>;

def QGemm_GroupedMatmulOp : QGemm_Op<"grouped_matmul", [Symbol, NoTerminator]> {
  let summary = "a block-scaled FP8 grouped GEMM kernel, D = A . B^T (+ C)";
  let description = [{
    Declares one kernel. For `m_*` and `none` groupings D is (M, n) with the
    contraction over `k`; for `k_contiguous` D is (G, n, k) with the
    contraction over each group's tokens. M, the group count and the group
    description are run-time arguments.

    ```mlir
    qgemm.grouped_matmul @up n = 4096, k = 7168,
        a = #qgemm.operand<e4m3, #qgemm.scale<[1, 128], f32, COMPACT>>,
        b = #qgemm.operand<e4m3, #qgemm.scale<[128, 128], f32, COMPACT>>,
        d = <bf16>, grouping = #qgemm.grouping<m_contiguous, align = 128, index = offsets>,
        padding = <zero>
    ```

    qgemm-lower-to-tiles gives a wgmma-family declaration its tile-level
    body (QGemmTileOps.td, QGemmHopperOps.td): one block whose arguments are the kernel's
    parameters (KernelABI.h). qgemm-lower-tiles-to-hopper then replaces the
    op by the `llvm.func` kernel built from that body.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$n, I64Attr:$k,
                       QGemm_OperandAttr:$a, QGemm_OperandAttr:$b,
                       QGemm_ElemTypeAttr:$d, QGemm_GroupingAttr:$grouping,
                       QGemm_PaddingRowsAttr:$padding_rows,
                       UnitAttr:$accumulate,
                       OptionalAttr<QGemm_TuningAttr>:$tuning,
                       OptionalAttr<QGemm_KernelConfigAttr>:$config);
  let assemblyFormat = [{
    $sym_name `n` `=` $n `,` `k` `=` $k `,` `a` `=` qualified($a) `,`
    `b` `=` qualified($b) `,` `d` `=` $d `,` `grouping` `=` qualified($grouping)
    `,` `padding` `=` $padding_rows (`accumulate` $accumulate^)?
    (`body` $body^)? attr-dict
  }];
  let regions = (region MaxSizedRegion<1>:$body);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The op's contract in the vocabulary of qgemm/Contract.h.
    ::qgemm::GemmContract getContract();
    /// The tuning request (auto when absent).
    ::qgemm::Tuning getTuningRequest();
    /// The resolved configuration; absent until qgemm-resolve-config ran.
    std::optional<::qgemm::KernelConfig> getKernelConfig();
  }];
}

def QGemm_QuantizeOp : QGemm_Op<"quantize", [Symbol]> {
  let summary = "a quantizer kernel: bf16/f32 in, FP8 plus block scales out";
  let description = [{
    ```mlir
    qgemm.quantize @act <bf16> -> <e4m3> recipe = <deepseek>
        rowwise = #qgemm.scale<[1, 128], f32, COMPACT>
    qgemm.quantize @spread <bf16> -> <e4m3> recipe = <deepseek>
        rowwise = #qgemm.scale<[1, 128], f32, COMPACT>
        {gather_topk = 8 : i64, gather_probs}
    qgemm.quantize @step <bf16> -> <e4m3> recipe = <deepseek>
        rowwise = #qgemm.scale<[128, 128], f32, COMPACT>
        {adamw_state = #qgemm.elem<f32>, multi_tensor}
    ```
    With `gather_topk` > 0 the rows are gathered from tokens by a permute's
    row_map and row_group (weighted by their probabilities with
    `gather_probs`): qgemm/Contract.h GatherRows. With `adamw_state` the
    kernel is the weights' AdamW step, its state of that type, and it
    quantizes the updated weights: qgemm/Contract.h AdamwUpdate.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, QGemm_ElemTypeAttr:$input,
                       QGemm_ElemTypeAttr:$output, QGemm_QuantRecipeAttr:$recipe,
                       OptionalAttr<QGemm_ScaleRecipeAttr>:$rowwise,
                       OptionalAttr<QGemm_ScaleRecipeAttr>:$columnwise,
                       UnitAttr:$pow2, DefaultValuedAttr<F64Attr, "0.0">:$eps,
                       UnitAttr:$multi_tensor,
                       DefaultValuedAttr<I64Attr, "0">:$k,
                       DefaultValuedAttr<I64Attr, "0">:$gather_topk,
                       UnitAttr:$gather_probs,
                       OptionalAttr<QGemm_ElemTypeAttr>:$adamw_state);
  let assemblyFormat = [{
    $sym_name $input `->` $output `recipe` `=` $recipe
    (`rowwise` `=` qualified($rowwise)^)?
    (`columnwise` `=` qualified($columnwise)^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::qgemm::QuantizeContract getContract();
  }];
}

def QGemm_PermuteOp : QGemm_Op<"permute", [Symbol]> {
  let summary = "token dispatch: routing -> expert-major rows padded per group";
  let description = [{
    Moves each token's copies (one per non-dropped routing entry) to
    expert-major rows, FP8 data with its scales (`scale` = the input's
    recipe, `out_scale` = the permuted one) or bf16 data, and pads each
    expert's group to `align` rows; with `backward`, the gradient op.
    The fused form (`quantize`): bf16/f32 tokens quantized row-wise on the
    way, like `qgemm.quantize` with `recipe` (`pow2`, `eps`) and row-wise
    scales `out_scale`, into FP8 rows of type `quantize`.
    The run-time I/O contract: qgemm/DispatchContract.h.

    ```mlir
    qgemm.permute @dispatch <e4m3> k = 7168, topk = 8, align = 128
        scale = #qgemm.scale<[1, 128], f32, COMPACT>
        out_scale = #qgemm.scale<[1, 128], f32, GEMM_READY> probs
    qgemm.permute @fused <bf16> k = 7168, topk = 8, align = 128
        quantize <e4m3> recipe = <deepseek>
        out_scale = #qgemm.scale<[1, 128], f32, GEMM_READY>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, QGemm_ElemTypeAttr:$dtype,
                       I64Attr:$k, I64Attr:$topk, I64Attr:$alignment,
                       OptionalAttr<QGemm_ScaleRecipeAttr>:$scale,
                       OptionalAttr<QGemm_ScaleRecipeAttr>:$out_scale,
                       UnitAttr:$probs, UnitAttr:$backward,
                       OptionalAttr<QGemm_ElemTypeAttr>:$quant_dtype,
                       OptionalAttr<QGemm_QuantRecipeAttr>:$recipe,
                       UnitAttr:$pow2, DefaultValuedAttr<F64Attr, "0.0">:$eps);
  let assemblyFormat = [{
    $sym_name $dtype `k` `=` $k `,` `topk` `=` $topk `,` `align` `=` $alignment
    (`quantize` $quant_dtype^ `recipe` `=` $recipe)?
    (`scale` `=` qualified($scale)^)? (`out_scale` `=` qualified($out_scale)^)?
    (`probs` $probs^)? (`backward` $backward^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::qgemm::PermuteContract getContract();
  }];
}

def QGemm_UnpermuteOp : QGemm_Op<"unpermute", [Symbol]> {
  let summary = "token combine: bf16 expert rows -> tokens, weighted by probs";
  let description = [{
    ```mlir
    qgemm.unpermute @combine k = 7168, topk = 8 probs
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$k, I64Attr:$topk,
                       UnitAttr:$probs, UnitAttr:$backward);
  let assemblyFormat = [{
    $sym_name `k` `=` $k `,` `topk` `=` $topk (`probs` $probs^)?
    (`backward` $backward^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::qgemm::UnpermuteContract getContract();
  }];
}

def QGemm_SwigluOp : QGemm_Op<"swiglu", [Symbol]> {
  let summary = "SwiGLU over a merged gate/up projection, then FP8 quantize; "
                "or its backward";
  let description = [{
    Forward: y = silu(gate) * up over a bf16 (M, 2I) input whose gate and up
    halves are stacked (default) or `interleaved`, quantized like
    `qgemm.quantize` would quantize an f32 y (`output`, `recipe`, `rowwise`,
    `columnwise`, `pow2`, `eps`), with `bf16_output` also writing bf16 y.
    With `backward`: dy (M, I) and x -> dx (M, 2I) in x's layout; with
    quantizer attributes too, the bf16 dx is quantized in the same pass
    instead of written (the quantized backward). The exact f32 math:
    qgemm/SwigluContract.h. `i` = 0: I is a run-time argument.

    ```mlir
    qgemm.swiglu @act i = 2048 quantize <e4m3> recipe = <deepseek>
        rowwise = #qgemm.scale<[1, 128], f32, COMPACT> {bf16_output}
    qgemm.swiglu @act_bwd i = 2048 backward {interleaved}
    qgemm.swiglu @act_bwdq i = 2048 backward quantize <e4m3>
        recipe = <deepseek> rowwise = #qgemm.scale<[1, 128], f32, COMPACT>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       DefaultValuedAttr<I64Attr, "0">:$i,
                       UnitAttr:$interleaved, UnitAttr:$backward,
                       UnitAttr:$bf16_output,
                       OptionalAttr<QGemm_ElemTypeAttr>:$output,
                       OptionalAttr<QGemm_QuantRecipeAttr>:$recipe,
                       OptionalAttr<QGemm_ScaleRecipeAttr>:$rowwise,
                       OptionalAttr<QGemm_ScaleRecipeAttr>:$columnwise,
                       UnitAttr:$pow2, DefaultValuedAttr<F64Attr, "0.0">:$eps);
  let assemblyFormat = [{
    $sym_name `i` `=` $i (`backward` $backward^)?
    (`quantize` $output^ `recipe` `=` $recipe)?
    (`rowwise` `=` qualified($rowwise)^)?
    (`columnwise` `=` qualified($columnwise)^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::qgemm::SwigluContract getContract();
  }];
}

include "qgemm/Dialect/QGemmTileOps.td"
include "qgemm/Dialect/QGemmHopperOps.td"

#endif // QGEMM_OPS_TD
