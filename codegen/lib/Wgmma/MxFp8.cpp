//===- MxFp8.cpp - MXFP8 (1x32 UE8M0 scales) in the wgmma kernel ----------===//
//
// MXFP8 scales every 32 contraction elements of every row of A and of B
// (one E8M0 byte each, LAYOUTS.md "MXFP8"). Hopper has no block-scaled MMA,
// so each k32 wgmma step of a 128-wide K block is its own scale block: the
// consumers run it from zero into a fragment and promote it at once,
//   acc[r][c] += frag[r][c] * (sa[r][j] * sb[c][j])        (j = 0..3),
// the arithmetic of the SIMT kernel (f32 product of the decoded scales,
// then one FMA), so results match it on every scale, E8M0 extremes
// included.
//
// Producer: per K block each of the 128 producer threads reads the four
// scale bytes of one A row and of one or two B rows (any layout, any byte
// alignment: plain byte loads, clamped in bounds and replaced by 0 past the
// operand), decodes them exactly (KernelIR::decodeUE8M0) and stores f32 in
// the stage, then arrives on the full barrier: A as [row][step] (one
// 16-byte load per row for the consumer), B as [step][column] with columns
// permuted so that the four columns a consumer thread promotes from two
// adjacent 8-column fragment groups are one 16-byte load (columnSlot).
//
// What bounds the promotion. Per 32 K each accumulator needs its own scale
// (a thread holds 2 rows x blockN/4 columns, and both row and column
// scales change every step), so one op forming sa*sb plus one FFMA per
// accumulator is the floor; the column scales cost blockN/16 shared loads
// a step, the row scales two a K block. Forming the product by adding
// exponents as integers (IADD on the ALU pipe) instead of an FMUL is
// exact only while the product stays a normal f32: E8M0 products span
// 2^-254..2^254 (0x00 * 0x00 underflows, 0xFE * 0xFE overflows, 0xFF is
// NaN), and a wrapped exponent field would turn a zero partial sum into
// NaN, so that form needs range handling the FMUL gets for free. Either
// way every element costs two issue slots per 32 K against one FFMA per
// 128 K for 1x128 scales: the promotion's issue slots, not the tensor core
// nor the FMA pipe, bound this kernel. Measured on the H100 (docs/
// PERF_NOTES.md, "MXFP8"): the IADD form and software-pipelining the steps
// both gave nothing; ~0.38x the 1x128 kernel on the same shape.
//
//===----------------------------------------------------------------------===//
#include "WgmmaKernel.h"

using namespace mlir;
using namespace mlir::qgemm::wgmma;
using mlir::qgemm::emitScaleAddress;
using mlir::qgemm::emitTokenScaleAddress;
using mlir::qgemm::ScaleAddress;

namespace {

/// Position, in f32 elements within one step's row of B scales, of tile
/// column `j`: fragment element i of a consumer thread belongs to column
/// (i/4)*8 + q*2 + i%2 (q = lane % 4), so 8-column groups g and g+1 (g
/// even) of quad q, columns e = 0, 1, sit at ((g/2)*4 + q)*4 + (g%2)*2 + e.
Value columnSlot(mlir::qgemm::KernelIR &ir, Value j) {
  Value g = ir.divU(j, ir.i32(8));
  Value q = ir.divU(ir.remU(j, ir.i32(8)), ir.i32(2));
  Value e = ir.remU(j, ir.i32(2));
  Value quad = ir.add(ir.mul(ir.divU(g, ir.i32(2)), ir.i32(4)), q);
  return ir.add(ir.add(ir.mul(quad, ir.i32(4)),
                       ir.mul(ir.remU(g, ir.i32(2)), ir.i32(2))),
                e);
}

} // namespace

/// The four decoded scales, from scale block `sb0` on, of row `row` of an
/// operand with `rows` x `cols` elements (scale matrix `matrix` of a
/// stacked operand when given): 0.0 past the operand's rows or scale
/// blocks, where the data is zero-filled or the step is skipped. The reads
/// are clamped in bounds, their values then dropped.
SmallVector<Value> Producer::mxRowScales(const ScaleRecipe &recipe,
                                         Value base, Value rows, Value cols,
                                         Value matrix, Value row, Value sb0) {
  KernelIR &ir = k.ir;
  const int64_t steps = k.layout.scaleSteps();
  Value rowLimit = ir.toI64(rows);
  // Token blocks that restart at each group: a grid of Tb columns.
  const bool restart = k.wgrad() && k.restartsTokens();
  Value blocks = restart ? ir.toI64(k.tile.tokenScaleBlocks)
                         : ir.ceilDiv(ir.toI64(cols), k.cfg.scaleBlockK);
  Value r = ir.toI64(row);
  Value first = ir.toI64(sb0);
  Value rowOk = ir.cmp(arith::CmpIPredicate::slt, r, rowLimit);
  Value rc = ir.minS(r, ir.sub(rowLimit, ir.i64(1)));
  auto address = [&](Value sb) {
    ScaleAddress a =
        restart ? emitTokenScaleAddress(ir, recipe, rowLimit, blocks, rc, sb)
                : emitScaleAddress(ir, recipe, rowLimit, ir.toI64(cols), rc,
                                   sb);
    return matrix ? ir.add(ir.mul(ir.toI64(matrix), a.matrixSize), a.offset)
                  : a.offset;
  };
  // A row's bytes for scale blocks sb0..sb0+3 are contiguous in COMPACT,
  // and in GEMM_READY when sb0 is a multiple of 4 (one 4-column slice of a
  // 512-byte atom): always so for K blocks, not for a k_contiguous group
  // that starts inside a 128-token block. Computing the address once keeps
  // the 40-register producer from spilling.
  const bool contiguous =
      recipe.layout == ScaleLayout::Compact || !k.wgrad();
  Value first0 = contiguous ? address(first) : Value();
  SmallVector<Value> out;
  for (int64_t j = 0; j < steps; ++j) {
    Value sb = ir.add(first, ir.i64(j));
    Value ok = arith::AndIOp::create(
        k.b, rowOk, ir.cmp(arith::CmpIPredicate::slt, sb, blocks));
    // sb0 itself is always a block of the operand (a K block, or a token
    // block of the group's range); later ones may lie past the last.
    Value jc = ir.minS(ir.i64(j), ir.sub(ir.sub(blocks, ir.i64(1)), first));
    Value idx = contiguous ? ir.add(first0, jc) : address(ir.add(first, jc));
    Value v = ir.decodeUE8M0(ir.load(ir.i8T(), base, idx));
    out.push_back(ir.select(ok, v, ir.f32(0.0)));
  }
  return out;
}

void Producer::mxScales(Value s, Value k0, Value tid) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  const KernelConfig &cfg = k.cfg;
  const TileValues &t = k.tile;
  const int64_t steps = k.layout.scaleSteps();
  Value scales = k.stageScales(s);
  // The K block's first scale block: k0 / 32, or with restarted token
  // blocks start(g) + (k0 - first_g) / 32 (a K block starts a whole number
  // of 32-token blocks into its group).
  Value sb0 =
      k.wgrad() && k.restartsTokens()
          ? ir.add(t.tokenScaleStart,
                   ir.divU(ir.sub(k0, t.tokenStart), ir.i32(cfg.scaleBlockK)))
          : ir.divU(k0, ir.i32(cfg.scaleBlockK));
  Value m0 = k.tileRow0();
  Value n0 = ir.mul(t.nBlock, ir.i32(cfg.blockN));
  // A: (M, K), (M_max, K) per group, or (n, T) for k_contiguous.
  Value aRows = k.wgrad() ? ir.i32(k.c.n) : t.rows;
  Value aCols = k.wgrad() ? t.rows : ir.i32(k.c.k);
  // B: (N, K) per group, or (k, T).
  Value bRows = ir.i32(k.wgrad() ? k.c.k : k.c.n);
  Value bCols = aCols;
  {
    SmallVector<Value> v = mxRowScales(k.c.a.scale, k.arg(kWgParamScaleA),
                                       aRows, aCols,
                                       k.masked() ? t.group : Value(),
                                       ir.add(m0, tid), sb0);
    auto vecT = VectorType::get({steps}, ir.f32T());
    Value vec = LLVM::UndefOp::create(b, vecT);
    for (int64_t j = 0; j < steps; ++j)
      vec = LLVM::InsertElementOp::create(b, vec, v[size_t(j)], ir.i32(j));
    LLVM::StoreOp::create(b, vec,
                          k.sharedF32(scales, ir.mul(tid, ir.i32(steps))),
                          /*alignment=*/16);
  }
  for (int64_t j0 = 0; j0 < cfg.blockN; j0 += kWarpgroupThreads) {
    Value j = ir.add(tid, ir.i32(j0));
    auto ifMine = scf::IfOp::create(
        b, ir.cmp(arith::CmpIPredicate::slt, j, ir.i32(cfg.blockN)), false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&ifMine.getThenRegion().front());
    SmallVector<Value> v = mxRowScales(
        k.c.b.scale, k.arg(kWgParamScaleB), bRows, bCols,
        k.wgrad() ? Value() : t.group, ir.add(n0, j), sb0);
    Value slot = ir.add(ir.i32(k.layout.scaleSlotB()), columnSlot(ir, j));
    for (int64_t st = 0; st < steps; ++st)
      LLVM::StoreOp::create(
          b, v[size_t(st)],
          k.sharedF32(scales, ir.add(slot, ir.i32(st * cfg.blockN))));
  }
  // Release: the stores above are visible to the consumers' acquire wait.
  k.hw.mbarrierArrive(k.fullBar(s));
}

/// acc[i] += frag[i] * (sa * sb) for step `step`: sa0/sa1 are the thread's
/// two rows' A scales, the B scales come four columns per shared load.
void Mainloop::promoteStep(Value frag, Value sa0, Value sa1, Value scalePtr,
                           int64_t step, Value lane,
                           MutableArrayRef<Value> acc) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  const int64_t n = k.cfg.blockN;
  auto quadT = VectorType::get({4}, ir.f32T());
  Value q4 = ir.mul(ir.remU(lane, ir.i32(4)), ir.i32(4));
  Value stepBase = ir.add(ir.i32(k.layout.scaleSlotB() + step * n), q4);
  for (int64_t gp = 0; gp < n / 16; ++gp) {
    Value quad = LLVM::LoadOp::create(
        b, quadT, k.sharedF32(scalePtr, ir.add(stepBase, ir.i32(gp * 16))),
        /*alignment=*/16);
    for (int64_t h = 0; h < 2; ++h) {
      const int64_t g = 2 * gp + h;
      for (int64_t e = 0; e < 2; ++e) {
        Value sb = LLVM::ExtractElementOp::create(b, quad, ir.i32(2 * h + e));
        for (int64_t r = 0; r < 2; ++r) {
          const int64_t i = 4 * g + 2 * r + e;
          Value scale = arith::MulFOp::create(b, r ? sa1 : sa0, sb);
          Value p = LLVM::ExtractValueOp::create(b, frag, ArrayRef<int64_t>{i});
          Value &a = acc[size_t(i)];
          a = LLVM::FMAOp::create(b, p, scale, a);
        }
      }
    }
  }
}

/// The tile's K blocks with MXFP8 scales: per k32 step wgmma, wait, then
/// promote with the step's scales read from the stage;
/// k_contiguous skips the steps past the group's last token (the TMA box
/// may reach into the next group) and, where groups are multiples of 16
/// tokens only, zeroes the second half of a step the group ends in.
SmallVector<Value> Mainloop::runMx(Value it, Value consumerIdx, Value tidInWg,
                                   Value rowInTile, Value lane) {
  KernelIR &ir = k.ir;
  ImplicitLocOpBuilder &b = k.b;
  const int64_t n = k.cfg.blockN;
  const int64_t steps = k.layout.scaleSteps();
  SmallVector<Value> zeros(size_t(n / 2), ir.f32(0.0));
  auto loop =
      scf::ForOp::create(b, ir.i32(0), k.tile.kBlockCount, ir.i32(1), zeros);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(loop.getBody());
  Value kb = loop.getInductionVar();
  Value s = k.stageOf(ir.add(it, kb));
  k.hw.mbarrierWait(k.fullBar(s), k.phaseOf(ir.add(it, kb)));
  // Groups of 16 (alignment 16, blocks restarting at each group) can end
  // in the middle of a k32 step: zero the tokens of the group's last K
  // block past its end, as the 1x128 kernel does; whole steps past it are
  // skipped below.
  if (k.restartsTokens()) {
    Value last = arith::AndIOp::create(
        b, k.eq(ir.sub(k.tile.kBlockCount, kb), 1),
        ir.cmp(arith::CmpIPredicate::ne,
               ir.remU(k.tile.tailTokens, ir.i32(k.cfg.scaleBlockK)),
               ir.i32(0)));
    auto ifTail = scf::IfOp::create(b, last, false);
    OpBuilder::InsertionGuard inTail(b);
    b.setInsertionPointToStart(&ifTail.getThenRegion().front());
    zeroTokenTail(s, consumerIdx, tidInWg);
  }
  Value scalePtr = k.stageScales(s);
  // The thread's two A rows' scales of one step, loaded per step: held
  // for the whole block they cost the 192-wide tile its last free
  // registers (ptxas spilled).
  Value rowSlot0 = ir.mul(rowInTile, ir.i32(steps));
  auto rowScale = [&](int64_t row, int64_t step) {
    return LLVM::LoadOp::create(
        b, ir.f32T(),
        k.sharedF32(scalePtr, ir.add(rowSlot0, ir.i32(row * 8 * steps + step))));
  };
  Value validSteps;
  if (k.wgrad()) {
    Value k0 = ir.add(k.tile.tokenStart, ir.mul(kb, ir.i32(k.cfg.blockK)));
    validSteps =
        ir.ceilDiv(ir.sub(k.tile.tokenEnd, k0), k.cfg.scaleBlockK);
  }
  SmallVector<Value> acc(loop.getRegionIterArgs());
  SmallVector<Type> accTypes(size_t(n / 2), ir.f32T());
  for (int64_t step = 0; step < steps; ++step) {
    auto body = [&] {
      Value frag = k.hw.wgmmaWait(0, issueSteps(s, consumerIdx, step, 1));
      // Separate statements: the IR order does not depend on the host
      // compiler's argument evaluation order.
      Value sa0 = rowScale(0, step);
      Value sa1 = rowScale(1, step);
      promoteStep(frag, sa0, sa1, scalePtr, step, lane, acc);
    };
    if (!validSteps || step == 0) {
      body();
      continue;
    }
    auto ifStep = scf::IfOp::create(
        b, accTypes,
        ir.cmp(arith::CmpIPredicate::slt, ir.i32(step), validSteps), true);
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(&ifStep.getElseRegion().front());
    scf::YieldOp::create(b, acc);
    b.setInsertionPointToStart(&ifStep.getThenRegion().front());
    body();
    scf::YieldOp::create(b, acc);
    b.setInsertionPointAfter(ifStep);
    acc.assign(ifStep.getResults().begin(), ifStep.getResults().end());
  }
  release(s, tidInWg);
  scf::YieldOp::create(b, acc);
  return loop.getResults();
}
