//===- AddressAlgebraIRTest.cpp - The address algebra emitted as IR -------===//
//
// The same Swizzle.h and WgmmaLayout functions the kernels emit, built as
// arith ops through IRArith on constant inputs and folded op by op with the
// ops' own folders: each must come out as the integer IntArith gives (and
// SwizzleTest checks against the hardware's table).
//
//===----------------------------------------------------------------------===//

#include "qgemm/Codegen/IRArith.h"
#include "qgemm/Kernels/Swizzle.h"
#include "qgemm/Kernels/WgmmaLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <catch2/catch.hpp>

using namespace mlir;

namespace {

/// The integer `v` folds to: its ops folded in order from the constants.
int64_t foldToInt(Value v) {
  Operation *op = v.getDefiningOp();
  REQUIRE(op);
  SmallVector<Attribute> operands;
  for (Value in : op->getOperands())
    operands.push_back(
        IntegerAttr::get(in.getType(), APInt(32, uint64_t(foldToInt(in)))));
  if (auto c = dyn_cast<arith::ConstantIntOp>(op))
    return c.value();
  SmallVector<OpFoldResult> results;
  REQUIRE(succeeded(op->fold(operands, results)));
  REQUIRE(results.size() == 1);
  // An identity (x + 0, x * 1, 0 ^ x) folds to one of its operands.
  if (auto same = dyn_cast_if_present<Value>(results[0]))
    return foldToInt(same);
  auto attr = dyn_cast_if_present<IntegerAttr>(
      dyn_cast_if_present<Attribute>(results[0]));
  REQUIRE(attr);
  return attr.getInt();
}

struct Emitter {
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<ImplicitLocOpBuilder> b;
  std::unique_ptr<mlir::qgemm::KernelIR> ir;

  Emitter() {
    ctx.loadDialect<arith::ArithDialect>();
    module = ModuleOp::create(UnknownLoc::get(&ctx));
    b = std::make_unique<ImplicitLocOpBuilder>(UnknownLoc::get(&ctx), &ctx);
    b->setInsertionPointToStart(module->getBody());
    ir = std::make_unique<mlir::qgemm::KernelIR>(*b);
  }
};

} // namespace

TEST_CASE("the 128B swizzle emitted as IR folds to its integer values",
          "[swizzle]") {
  Emitter e;
  mlir::qgemm::IRArith a{*e.ir};
  ::qgemm::IntArith n;
  const ::qgemm::Swizzle &sw = ::qgemm::kSwizzle128B;
  for (int64_t r = 0; r < 64; r += 3)
    for (int64_t c = 0; c < 24; ++c) {
      if (c < 8)
        REQUIRE(foldToInt(sw.offset(a, e.ir->i32(r), e.ir->i32(c))) ==
                sw.offset(n, r, c));
      REQUIRE(foldToInt(sw.tiledOffset(a, e.ir->i32(r), e.ir->i32(c), 8192)) ==
              sw.tiledOffset(n, r, c, 8192));
    }
}

TEST_CASE("the epilogue's chunk offsets emitted as IR fold to the layout's",
          "[swizzle]") {
  Emitter e;
  mlir::qgemm::IRArith a{*e.ir};
  for (int blockN : {192, 160}) { // boxed (64-column boxes), padded rows
    ::qgemm::KernelConfig cfg;
    cfg.blockM = 128;
    cfg.blockN = blockN;
    cfg.blockK = 128;
    cfg.stages = 4;
    cfg.stagedEpilogue = true;
    ::qgemm::WgmmaLayout l(cfg);
    CHECK(l.boxedEpilogue() == (blockN % 64 == 0));
    for (int64_t r = 0; r < 64; r += 5)
      for (int64_t c = 0; c < blockN / 8; ++c)
        REQUIRE(foldToInt(l.epilogueChunkOffset(a, e.ir->i32(r),
                                                e.ir->i32(c))) ==
                l.epilogueChunkOffset(r, c));
  }
}
