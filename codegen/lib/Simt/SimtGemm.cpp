//===- SimtGemm.cpp - The SIMT grouped GEMM kernel family
//------------------===//
//
// The first, simple kernel family: one thread per output element, the
// contraction walked in scale blocks. Inside a block the products accumulate
// in f32; at each block end the partial sum is multiplied by the A and B block
// scales and added to the running f32 accumulator ("promotion"), which is the
// arithmetic the fast wgmma kernels perform too.
//
// Grid and parameters: qgemm/Kernels/SimtABI.h.
//
//===----------------------------------------------------------------------===//
#include "SimtGemm.h"
#include "qgemm/Codegen/IRHelpers.h"
#include "qgemm/Codegen/Target/HopperIR.h"
#include "qgemm/Kernels/SimtABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace ::qgemm; // contract vocabulary and KernelABI
using mlir::qgemm::emitScaleAddress;
using mlir::qgemm::emitTokenScaleAddress;
using mlir::qgemm::GroupedMatmulOp;
using mlir::qgemm::HopperIR;
using mlir::qgemm::KernelIR;
using mlir::qgemm::ScaleAddress;

namespace {

/// Builds the body of one grouped GEMM kernel.
class SimtGemmBuilder {
public:
  SimtGemmBuilder(ImplicitLocOpBuilder &b, const GemmContract &c,
                  Block::BlockArgListType args)
      : b(b), ir(b), c(c), args(args.begin(), args.end()) {}

  void build() {
    if (c.grouping.kind == GroupingKind::KContiguous)
      buildWeightGradient();
    else
      buildRowGrouped();
  }

private:
  Value arg(unsigned i) { return args[i]; }
  Value ctaid(int dim) {
    HopperIR hw(ir);
    switch (dim) {
    case 0: return hw.blockIdX();
    case 1: return hw.blockIdY();
    default: return hw.blockIdZ();
    }
  }
  /// Column this thread owns: y block * 128 + thread x.
  Value column() {
    Value tid = HopperIR(ir).threadIdX();
    return ir.add(ir.mul(ctaid(1), ir.i32(kSimtBlockThreads)), tid);
  }

  /// sum over blocks kb in [kbBegin, kbEnd) of
  ///   (sum_{k in block, k < kLen} A[aBase + k] * B[bBase + k]) * sa(kb) * sb(kb)
  /// where block kb holds k in [kOrigin + kb*blk, kOrigin + (kb+1)*blk);
  /// no kOrigin means 0 (and emits no add).
  Value scaledDot(Value aBase, Value bBase, Value kbBegin, Value kbEnd,
                  Value kLen, int64_t blk,
                  llvm::function_ref<Value(Value)> scaleA,
                  llvm::function_ref<Value(Value)> scaleB,
                  Value kOrigin = nullptr) {
    auto outer = scf::ForOp::create(b, kbBegin, kbEnd, ir.i64(1),
                                    ValueRange{ir.f32(0.0)});
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(outer.getBody());
      Value kb = outer.getInductionVar();
      Value acc = outer.getRegionIterArgs()[0];
      Value k0 = ir.mul(kb, ir.i64(blk));
      if (kOrigin)
        k0 = ir.add(kOrigin, k0);
      Value k1 = ir.minS(ir.add(k0, ir.i64(blk)), kLen);
      auto inner = scf::ForOp::create(b, k0, k1, ir.i64(1),
                                      ValueRange{ir.f32(0.0)});
      {
        OpBuilder::InsertionGuard g2(b);
        b.setInsertionPointToStart(inner.getBody());
        Value k = inner.getInductionVar();
        Value a = ir.decodeFp8(ir.load(ir.i8T(), arg(kParamA), ir.add(aBase, k)),
                               c.a.dtype);
        Value bv = ir.decodeFp8(
            ir.load(ir.i8T(), arg(kParamB), ir.add(bBase, k)), c.b.dtype);
        Value p = arith::AddFOp::create(b, inner.getRegionIterArgs()[0],
                                        arith::MulFOp::create(b, a, bv));
        scf::YieldOp::create(b, p);
      }
      // Separate statements: the A scale load is emitted before the B one.
      Value sa = scaleA(kb);
      Value sb = scaleB(kb);
      Value scale = arith::MulFOp::create(b, sa, sb);
      Value next = arith::AddFOp::create(
          b, acc, arith::MulFOp::create(b, inner.getResult(0), scale));
      scf::YieldOp::create(b, next);
    }
    return outer.getResult(0);
  }

  /// Write `acc` (+ C) to D at `index`, converting to the output type.
  void storeOutput(Value acc, Value index) {
    if (c.accumulate)
      acc = arith::AddFOp::create(b, acc, ir.load(ir.f32T(), arg(kParamC), index));
    if (c.d == ::qgemm::ElemType::BF16)
      acc = arith::TruncFOp::create(b, ir.bf16T(), acc);
    ir.store(acc, arg(kParamD), index);
  }

  /// Group of `row` and whether the row is a padding row, per group index.
  std::pair<Value, Value> groupOfRow(Value row, Value gz) {
    Value numGroups = arg(kParamNumGroups);
    switch (c.grouping.index) {
    case GroupIndex::None:
      return {ir.i32(0), arith::ConstantIntOp::create(b, 0, 1)};
    case GroupIndex::MaskedM: {
      Value valid = ir.load(ir.i32T(), arg(kParamGroups), ir.toI64(gz));
      return {gz, ir.cmp(arith::CmpIPredicate::sge, row, valid)};
    }
    case GroupIndex::RowGroup: {
      Value g = ir.load(ir.i32T(), arg(kParamGroups), ir.toI64(row));
      Value bad = arith::OrIOp::create(
          b, ir.cmp(arith::CmpIPredicate::slt, g, ir.i32(0)),
          ir.cmp(arith::CmpIPredicate::sge, g, numGroups));
      return {g, bad};
    }
    case GroupIndex::Offsets: {
      // Group g owns rows [offsets[g-1], offsets[g]); rows at or past
      // offsets[G-1] are padding. G is small: a linear count suffices here.
      auto loop = scf::ForOp::create(b, ir.i32(0), numGroups, ir.i32(1),
                                     ValueRange{ir.i32(0)});
      {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(loop.getBody());
        Value end = ir.load(ir.i32T(), arg(kParamGroups),
                            ir.toI64(loop.getInductionVar()));
        Value past = ir.cmp(arith::CmpIPredicate::sle, end, row);
        Value cnt = ir.add(loop.getRegionIterArgs()[0],
                           arith::ExtUIOp::create(b, ir.i32T(), past));
        scf::YieldOp::create(b, cnt);
      }
      Value g = loop.getResult(0);
      return {g, ir.cmp(arith::CmpIPredicate::sge, g, numGroups)};
    }
    }
    llvm_unreachable("unknown group index");
  }

  /// m_contiguous, m_masked, none: D (rows, n) (per group for m_masked).
  void buildRowGrouped() {
    const bool masked = c.grouping.kind == GroupingKind::MMasked;
    const int64_t blk = ::qgemm::contractionBlock(c.a.scale);
    Value rows = arg(kParamRows);
    Value row = ctaid(0), col = column(), gz = ctaid(2);
    Value inRange = ir.cmp(arith::CmpIPredicate::slt, col, ir.i32(c.n));
    auto ifIn = scf::IfOp::create(b, inRange, /*withElse=*/false);
    b.setInsertionPointToStart(&ifIn.getThenRegion().front());

    auto [g, padding] = groupOfRow(row, gz);
    Value g64 = ir.toI64(g), row64 = ir.toI64(row), col64 = ir.toI64(col);
    // A row and output row inside the stacked (G, M_max, .) tensors.
    Value outRow = masked ? ir.add(ir.mul(g64, ir.toI64(rows)), row64) : row64;
    Value outIndex = ir.add(ir.mul(outRow, ir.i64(c.n)), col64);

    auto ifPad = scf::IfOp::create(b, padding, /*withElse=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifPad.getThenRegion().front());
      if (c.paddingRows == ::qgemm::PaddingRows::Zero)
        storeOutput(ir.f32(0.0), outIndex);
      // An accumulating kernel leaves C's padding rows as they are: D = C.
    }
    b.setInsertionPointToStart(&ifPad.getElseRegion().front());
    Value kLen = ir.i64(c.k);
    Value kBlocks = ir.i64((c.k + blk - 1) / blk);
    Value aBase = ir.mul(outRow, kLen);
    Value bRow = ir.add(ir.mul(g64, ir.i64(c.n)), col64);
    Value bBase = ir.mul(bRow, kLen);
    auto scaleA = [&](Value kb) {
      ScaleAddress s = emitScaleAddress(ir, c.a.scale, rows, kLen, row64, kb);
      Value idx = masked ? ir.add(ir.mul(g64, s.matrixSize), s.offset) : s.offset;
      return ir.loadScale(c.a.scale.dtype, arg(kParamScaleA), idx);
    };
    auto scaleB = [&](Value kb) {
      Value i = c.b.scale.blockRows == 1 ? col64 : ir.divU(col64, ir.i64(c.b.scale.blockRows));
      ScaleAddress s = emitScaleAddress(ir, c.b.scale, ir.i64(c.n), kLen, i, kb);
      Value idx = ir.add(ir.mul(g64, s.matrixSize), s.offset);
      return ir.loadScale(c.b.scale.dtype, arg(kParamScaleB), idx);
    };
    Value acc = scaledDot(aBase, bBase, ir.i64(0), kBlocks, kLen, blk, scaleA,
                          scaleB);
    storeOutput(acc, outIndex);
  }

  /// k_contiguous: D[g] (n, k) = A_g (n, T_g) . B_g (k, T_g)^T, both operands
  /// token-contiguous, the contraction over the group's tokens.
  void buildWeightGradient() {
    const int64_t blk = ::qgemm::contractionBlock(c.a.scale);
    Value tokens = ir.toI64(arg(kParamRows));
    Value nIdx = ctaid(0), kIdx = column(), g = ctaid(2);
    Value inRange = ir.cmp(arith::CmpIPredicate::slt, kIdx, ir.i32(c.k));
    auto ifIn = scf::IfOp::create(b, inRange, /*withElse=*/false);
    b.setInsertionPointToStart(&ifIn.getThenRegion().front());

    Value g64 = ir.toI64(g), n64 = ir.toI64(nIdx), k64 = ir.toI64(kIdx);
    Value prev = ir.load(ir.i32T(), arg(kParamGroups),
                         ir.toI64(arith::MaxSIOp::create(b, ir.sub(g, ir.i32(1)), ir.i32(0))));
    Value start = ir.toI64(ir.select(ir.cmp(arith::CmpIPredicate::eq, g, ir.i32(0)),
                                     ir.i32(0), prev));
    Value end = ir.toI64(ir.load(ir.i32T(), arg(kParamGroups), g64));
    if (::qgemm::restartsTokenBlocks(c)) {
      Value acc = restartedDot(g, start, end, n64, k64, tokens, blk);
      storeOutput(acc, weightGradIndex(g64, n64, k64));
      return;
    }
    auto scaleA = [&](Value tb) {
      ScaleAddress s = emitScaleAddress(ir, c.a.scale, ir.i64(c.n), tokens, n64, tb);
      return ir.loadScale(c.a.scale.dtype, arg(kParamScaleA), s.offset);
    };
    auto scaleB = [&](Value tb) {
      ScaleAddress s = emitScaleAddress(ir, c.b.scale, ir.i64(c.k), tokens, k64, tb);
      return ir.loadScale(c.b.scale.dtype, arg(kParamScaleB), s.offset);
    };
    Value acc = scaledDot(ir.mul(n64, tokens), ir.mul(k64, tokens),
                          ir.divU(start, ir.i64(blk)), ir.ceilDiv(end, blk), end,
                          blk, scaleA, scaleB);
    storeOutput(acc, weightGradIndex(g64, n64, k64));
  }

  /// D[g] (n, k) element of the weight gradient: (g*n + n64)*k + k64.
  Value weightGradIndex(Value g64, Value n64, Value k64) {
    return ir.add(ir.mul(ir.add(ir.mul(g64, ir.i64(c.n)), n64), ir.i64(c.k)),
                  k64);
  }

  /// Over all groups h (offsets are cumulative ends): Tb = sum of
  /// cd(m_h, blk), and start(g) = the same sum over h < g. Both i64.
  std::pair<Value, Value> tokenBlockCounts(Value g, int64_t blk) {
    Value i64Zero = ir.i64(0);
    auto loop = scf::ForOp::create(b, ir.i32(0), arg(kParamNumGroups),
                                   ir.i32(1),
                                   ValueRange{ir.i32(0), i64Zero, i64Zero});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value h = loop.getInductionVar();
      auto carried = loop.getRegionIterArgs();
      Value end = ir.load(ir.i32T(), arg(kParamGroups), ir.toI64(h));
      Value blocks = ir.ceilDiv(ir.toI64(ir.sub(end, carried[0])), blk);
      Value before = ir.cmp(arith::CmpIPredicate::slt, h, g);
      Value tb = ir.add(carried[1], blocks);
      Value start = ir.add(carried[2], ir.select(before, blocks, i64Zero));
      scf::YieldOp::create(b, ValueRange{end, tb, start});
    }
    return {loop.getResult(1), loop.getResult(2)};
  }

  /// k_contiguous whose token scale blocks restart at each group (LAYOUTS.md,
  /// "Grouping"): the group's tokens [start, end) in blocks of blk counted
  /// from `start`, the last one partial; block kb of the group is scale
  /// column start(g) + kb of a grid with Tb columns.
  Value restartedDot(Value g, Value start, Value end, Value n64, Value k64,
                     Value tokens, int64_t blk) {
    auto [tokenBlocks, groupStart] = tokenBlockCounts(g, blk);
    auto scaleA = [&](Value kb) {
      ScaleAddress s = emitTokenScaleAddress(ir, c.a.scale, ir.i64(c.n),
                                             tokenBlocks, n64,
                                             ir.add(groupStart, kb));
      return ir.loadScale(c.a.scale.dtype, arg(kParamScaleA), s.offset);
    };
    auto scaleB = [&](Value kb) {
      ScaleAddress s = emitTokenScaleAddress(ir, c.b.scale, ir.i64(c.k),
                                             tokenBlocks, k64,
                                             ir.add(groupStart, kb));
      return ir.loadScale(c.b.scale.dtype, arg(kParamScaleB), s.offset);
    };
    Value blocks = ir.ceilDiv(ir.sub(end, start), blk);
    return scaledDot(ir.mul(n64, tokens), ir.mul(k64, tokens), ir.i64(0),
                     blocks, end, blk, scaleA, scaleB, start);
  }

  ImplicitLocOpBuilder &b;
  KernelIR ir;
  const GemmContract &c;
  SmallVector<Value> args;
};

} // namespace

/// Declare the kernel function for `op` and fill its body.
void mlir::qgemm::lowerSimtGemm(GroupedMatmulOp op) {
  MLIRContext *ctx = op.getContext();
  OpBuilder mb(op);
  Type ptrT = LLVM::LLVMPointerType::get(ctx, 1);
  Type i32T = IntegerType::get(ctx, 32);
  SmallVector<Type> params(kNumGemmParams, ptrT);
  params[kParamRows] = params[kParamNumGroups] = i32T;
  auto fnT = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), params);
  auto fn = LLVM::LLVMFuncOp::create(mb, op.getLoc(), op.getSymName(), fnT);
  fn->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  fn->setAttr(NVVM::NVVMDialect::getReqntidAttrName(),
              DenseI32ArrayAttr::get(ctx, {kSimtBlockThreads, 1, 1}));

  Block *entry = fn.addEntryBlock(mb);
  ImplicitLocOpBuilder b(op.getLoc(), ctx);
  b.setInsertionPointToStart(entry);
  GemmContract contract = op.getContract();
  {
    OpBuilder::InsertionGuard g(b);
    SimtGemmBuilder(b, contract, entry->getArguments()).build();
  }
  b.setInsertionPointToEnd(entry);
  LLVM::ReturnOp::create(b, ValueRange{});
}
