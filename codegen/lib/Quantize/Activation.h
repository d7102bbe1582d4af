//===- Activation.h - The quantize kernel's activation stage ----*- C++ -*-===//
//
// An elementwise activation ahead of the quantizer, as TransformerEngine's
// act_fn is a parameter of its kernels: the quantize kernel
// (QuantizeKernel.cpp) stages act(x) in place of x (or, backward, the bf16
// dx from dy and the saved x) and quantizes that. The kernel owns the
// loads, bounds, the bf16 copy of y and the amaxes; an activation brings
// only its arithmetic, as IR. SwiGLU is one (Swiglu/SwigluActivation.cpp);
// another is one file that fills this struct and lowers its op through
// buildQuantizeKernel. The kernel's parameters are SwigluABI.h's, the ABI
// of every activation's quantizer.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_QUANTIZE_ACTIVATION_H
#define QGEMM_CODEGEN_QUANTIZE_ACTIVATION_H

#include "qgemm/Codegen/IRHelpers.h"
#include "qgemm/Contract.h"

#include <utility>

namespace mlir::qgemm::quant {

struct Activation {
  /// A gated activation (a GLU) reads two input elements per output
  /// element, gate and up, from rows of 2 cols: the halves stacked (gate
  /// columns, then up) or, `interleaved`, in (gate, up) pairs.
  bool gated = false;
  bool interleaved = false;
  /// The forward also writes y as bf16 (kSQParamBf16Out).
  bool bf16Output = false;
  /// The kernel stages the gradient dx (kSBQParamGradOut's dy and the saved
  /// x) rather than y: the quantized backward. Gated activations only.
  bool stagesGradient = false;

  /// y, f32, from the input widened to f32: act(gate, up) when gated,
  /// act(x) (`b` null) otherwise.
  Value (*forward)(KernelIR &ir, Value a, Value b) = nullptr;
  /// The gradient of a gated activation: (dgate, dup) from dy, gate and up,
  /// and each alone (the same operations, for a chunk of one half).
  std::pair<Value, Value> (*backward)(KernelIR &ir, Value dy, Value g,
                                      Value u) = nullptr;
  Value (*backwardGate)(KernelIR &ir, Value dy, Value g, Value u) = nullptr;
  Value (*backwardUp)(KernelIR &ir, Value dy, Value g) = nullptr;
};

/// Declares the quantize kernel named `name` next to `op` and builds its
/// body: kNumQuantizeParams parameters (QuantizeABI.h: more for gathered
/// rows, the AdamW step or an FP8 input), or with an activation the
/// parameters of SwigluABI.h. `act` null: the plain quantizer.
void buildQuantizeKernel(Operation *op, StringRef name,
                         const ::qgemm::QuantizeContract &contract,
                         const Activation *act);

} // namespace mlir::qgemm::quant

#endif // QGEMM_CODEGEN_QUANTIZE_ACTIVATION_H
