//===- LowerSwiglu.cpp - The qgemm.swiglu op's lowering -------------------===//
//
// One op, two kernels: the forward with a quantized output is the quantize
// kernel with a SwiGLU input stage (Quantize/QuantizeKernel.cpp); the
// backward is elementwise (BackwardKernel.cpp) and quantizes its dx through
// the same quantize kernel when its contract asks for it.
//
//===----------------------------------------------------------------------===//
#include "SwigluKernels.h"
#include "qgemm/Codegen/Kernels.h"

void mlir::qgemm::lowerSwiglu(SwigluOp op) {
  swigluQuantizes(op.getContract()) ? lowerSwigluQuantize(op)
                                    : lowerSwigluBackward(op);
}
