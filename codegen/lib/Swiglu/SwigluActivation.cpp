//===- SwigluActivation.cpp - SwiGLU as the quantizer's activation --------===//
//
// swiglu_quantize is the quantize kernel with SwiGLU as its activation
// (Quantize/Activation.h), and so is the quantized swiglu_backward, with
// SwiGLU's gradient: the arithmetic of SwigluMath.cpp, the halves and the
// bf16 copy of y from the op's contract.
//
//===----------------------------------------------------------------------===//
#include "../Quantize/Activation.h"
#include "SwigluMath.h"

#include "SwigluKernels.h"
#include "qgemm/Codegen/Kernels.h"

using namespace mlir;
using namespace mlir::qgemm;

void mlir::qgemm::lowerSwigluQuantize(SwigluOp op) {
  ::qgemm::SwigluContract sw = op.getContract();
  quant::Activation act;
  act.gated = true;
  act.interleaved = sw.halves != ::qgemm::SwigluHalves::Stacked;
  act.bf16Output = sw.bf16Output;
  act.stagesGradient = sw.backward;
  act.forward = swiglu::emitForward;
  act.backward = swiglu::emitBackward;
  act.backwardGate = swiglu::emitBackwardGate;
  act.backwardUp = swiglu::emitBackwardUp;
  // The quantizer sees y as a bf16-sourced (M, I) tensor of one tensor (the
  // quantized backward: its bf16 dx, (M, 2I)).
  ::qgemm::QuantizeContract q = sw.quant;
  q.input = ::qgemm::ElemType::BF16;
  q.multiTensor = false;
  quant::buildQuantizeKernel(op, op.getSymName(), q, &act);
}
