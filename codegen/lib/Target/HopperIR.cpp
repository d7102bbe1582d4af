//===- HopperIR.cpp - sm_90a building blocks: TMA, mbarriers, wgmma -------===//
#include "qgemm/Codegen/Target/HopperIR.h"

#include "qgemm/Dialect/QGemmDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::qgemm;

Type HopperIR::sharedPtrT() {
  return LLVM::LLVMPointerType::get(b.getContext(), /*addressSpace=*/3);
}

Value HopperIR::smemAt(Value base, Value offset) {
  return LLVM::GEPOp::create(b, sharedPtrT(), b.getI8Type(), base,
                             ValueRange{offset});
}

Value HopperIR::sharedAddress(Value ptr) {
  return LLVM::PtrToIntOp::create(b, b.getI32Type(), ptr);
}

void HopperIR::mbarrierInit(Value bar, int64_t count) {
  NVVM::MBarrierInitOp::create(b, bar, ir.i32(count), /*predicate=*/Value());
}

void HopperIR::mbarrierWait(Value bar, Value parity) {
  // The NVVM op loops on try_wait until the phase completed.
  NVVM::MBarrierTryWaitParityOp::create(b, bar, parity, ir.i32(0x989680));
}

void HopperIR::mbarrierArrive(Value bar) {
  NVVM::MBarrierArriveOp::create(b, Type(), bar, Value(),
                                 NVVM::MemScopeKindAttr());
}

void HopperIR::mbarrierArriveExpectTx(Value bar, int64_t bytes) {
  NVVM::MBarrierArriveExpectTxOp::create(b, Type(), bar, ir.i32(bytes),
                                         NVVM::MemScopeKind::CTA,
                                         /*relaxed=*/false, Value());
}

void HopperIR::cpAsync4(Value dst, Value src, Value srcBytes) {
  NVVM::CpAsyncOp::create(b, dst, src, b.getI32IntegerAttr(4),
                          NVVM::LoadCacheModifierKindAttr::get(
                              b.getContext(), NVVM::LoadCacheModifierKind::CA),
                          srcBytes);
}

void HopperIR::cpAsyncArriveNoinc(Value bar) {
  NVVM::CpAsyncMBarrierArriveOp::create(b, bar, /*noinc=*/true);
}

void HopperIR::tmaLoad(Value dst, Value map, ValueRange coords, Value bar,
                       Value multicastMask) {
  // The instruction's destination is a shared::cluster address; the CTA's own
  // shared window addresses are valid ones.
  Value clusterDst = LLVM::AddrSpaceCastOp::create(
      b, LLVM::LLVMPointerType::get(b.getContext(), 7), dst);
  NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
      b, clusterDst, map, coords, bar, ValueRange{}, multicastMask, Value(),
      NVVM::TMALoadMode::TILE, /*isCTAOnly=*/false, NVVM::CTAGroupKindAttr(),
      Value());
}

void HopperIR::tmaStore(Value map, Value src, ValueRange coords) {
  NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp::create(
      b, map, src, coords, /*l2CacheHint=*/Value(), NVVM::TMAStoreMode::TILE,
      /*predicate=*/Value());
}

void HopperIR::bulkCommit() { NVVM::CpAsyncBulkCommitGroupOp::create(b); }

void HopperIR::bulkWait(bool readOnly) {
  NVVM::CpAsyncBulkWaitGroupOp::create(
      b, uint32_t(0), readOnly ? UnitAttr::get(b.getContext()) : UnitAttr());
}

void HopperIR::fenceProxyAsyncShared() {
  NVVM::FenceProxyOp::create(
      b, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(b.getContext(),
                                 NVVM::SharedSpace::shared_cta));
}

void HopperIR::fenceMbarrierInit() { NVVM::FenceMbarrierInitOp::create(b); }

void HopperIR::syncThreads() { NVVM::Barrier0Op::create(b); }

void HopperIR::namedBarrier(Value id, Value threads) {
  NVVM::BarrierOp::create(b, TypeRange{}, id, threads,
                          NVVM::BarrierReductionAttr(), Value());
}

void HopperIR::setMaxRegisters(int registers, bool increase) {
  NVVM::SetMaxRegisterOp::create(b, registers,
                                 increase
                                     ? NVVM::SetMaxRegisterAction::increase
                                     : NVVM::SetMaxRegisterAction::decrease);
}

Value HopperIR::blockIdX() {
  return NVVM::BlockIdXOp::create(b, b.getI32Type());
}

Value HopperIR::blockIdY() {
  return NVVM::BlockIdYOp::create(b, b.getI32Type());
}

Value HopperIR::blockIdZ() {
  return NVVM::BlockIdZOp::create(b, b.getI32Type());
}

Value HopperIR::laneId() { return NVVM::LaneIdOp::create(b, b.getI32Type()); }

Value HopperIR::laneMaskLt() {
  return NVVM::LaneMaskLtOp::create(b, b.getI32Type());
}

Value HopperIR::ballot(Value pred) {
  return NVVM::VoteSyncOp::create(b, b.getI32Type(), ir.i32(-1), pred,
                                  NVVM::VoteSyncKind::ballot);
}

Value HopperIR::shfl(NVVM::ShflKind kind, Value v, int offset, int clamp) {
  return NVVM::ShflOp::create(b, v.getType(), ir.i32(-1), v, ir.i32(offset),
                              ir.i32(clamp), kind, UnitAttr());
}

Value HopperIR::syncThreadsOr(Value value) {
  return NVVM::BarrierOp::create(
             b, TypeRange{b.getI32Type()}, Value(), Value(),
             NVVM::BarrierReductionAttr::get(b.getContext(),
                                             NVVM::BarrierReduction::OR),
             value)
      .getResult(0);
}

Value HopperIR::cvtF32x2ToFp8x2(Value hi, Value lo, Type fp8T) {
  return NVVM::ConvertF32x2ToF8x2Op::create(
      b, ir.i16T(), hi, lo, NVVM::FPRoundingMode::RN,
      NVVM::SaturationMode::SATFINITE, /*relu=*/false, fp8T);
}

Value HopperIR::gridDimX() {
  return NVVM::GridDimXOp::create(b, b.getI32Type());
}

Value HopperIR::clusterCtaRank() {
  return NVVM::BlockInClusterIdXOp::create(b, b.getI32Type());
}

void HopperIR::clusterSync() {
  NVVM::ClusterArriveOp::create(b, UnitAttr());
  NVVM::ClusterWaitOp::create(b, UnitAttr());
}

void HopperIR::mbarrierArriveRemote(Value bar, Value rank) {
  Value remote = NVVM::MapaOp::create(
      b, LLVM::LLVMPointerType::get(b.getContext(), 7), bar, rank);
  // Release at CTA scope, as for a local arrive: the peer's producer only
  // needs this CTA's reads of the stage (complete at wgmma.wait_group) to
  // come before its next multicast into it. A cluster-scope release also
  // waits for every earlier global store of the thread (the previous
  // tile's D) to become visible to the cluster, on each K block: with it
  // the 2-CTA kernels ran at half speed, stalled on L1TEX (ncu).
  NVVM::MBarrierArriveOp::create(b, Type(), remote, Value(),
                                 NVVM::MemScopeKind::CTA);
}

Value HopperIR::wgmmaDescriptor(Value sharedAddr32, int64_t atomBytes,
                                int64_t swizzleBytes) {
  return WgmmaDescriptorOp::create(b, ir.i64T(), sharedAddr32,
                                   b.getI64IntegerAttr(atomBytes),
                                   b.getI64IntegerAttr(swizzleBytes));
}

Type HopperIR::accumulatorT(int64_t n) {
  SmallVector<Type> fields(size_t(n / 2), b.getF32Type());
  return LLVM::LLVMStructType::getLiteral(b.getContext(), fields);
}

static NVVM::WGMMATypes wgmmaType(::qgemm::ElemType t) {
  return t == ::qgemm::ElemType::E5M2 ? NVVM::WGMMATypes::e5m2
                                      : NVVM::WGMMATypes::e4m3;
}

Value HopperIR::wgmma(Value acc, Value descA, Value descB, int64_t n,
                      ::qgemm::ElemType a, ::qgemm::ElemType bType,
                      bool accumulate) {
  return NVVM::WgmmaMmaAsyncOp::create(
      b, accumulatorT(n), acc, descA, descB,
      NVVM::MMAShapeAttr::get(b.getContext(), 64, int(n), 32), wgmmaType(a),
      wgmmaType(bType), NVVM::WGMMATypes::f32,
      accumulate ? NVVM::WGMMAScaleOut::one : NVVM::WGMMAScaleOut::zero,
      NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row,
      NVVM::MMALayout::col, NVVM::MMAIntOverflowAttr());
}

void HopperIR::wgmmaFence() { NVVM::WgmmaFenceAlignedOp::create(b); }

void HopperIR::wgmmaCommitGroup() { NVVM::WgmmaGroupSyncAlignedOp::create(b); }

void HopperIR::stMatrix(Value at, ValueRange regs) {
  NVVM::StMatrixOp::create(b, at, regs, NVVM::MMALayout::row,
                           NVVM::LdStMatrixShapeAttr::get(b.getContext(), 8, 8),
                           NVVM::LdStMatrixEltType::B16);
}

void HopperIR::markKernel(LLVM::LLVMFuncOp fn, int threads, int cluster) {
  MLIRContext *ctx = fn.getContext();
  fn->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  fn->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(),
              DenseI32ArrayAttr::get(ctx, {threads, 1, 1}));
  fn->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
              IntegerAttr::get(IntegerType::get(ctx, 32), 1));
  if (cluster > 1)
    fn->setAttr(NVVM::NVVMDialect::getClusterDimAttrName(),
                DenseI32ArrayAttr::get(ctx, {cluster, 1, 1}));
}

void HopperIR::markTensorMapParam(LLVM::LLVMFuncOp fn, unsigned i) {
  MLIRContext *ctx = fn.getContext();
  fn.setArgAttr(
      i, LLVM::LLVMDialect::getByValAttrName(),
      TypeAttr::get(LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), 128)));
  fn.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                IntegerAttr::get(IntegerType::get(ctx, 64), 64));
  fn.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(),
                UnitAttr::get(ctx));
}

Value HopperIR::threadIdXInPlace() {
  return PinnedThreadIdOp::create(b, b.getI32Type());
}

Value HopperIR::wgmmaWait(int pending, Value frag) {
  return WgmmaWaitOp::create(b, frag.getType(), frag, pending);
}

Value HopperIR::threadIdX() {
  return NVVM::ThreadIdXOp::create(b, b.getI32Type());
}
