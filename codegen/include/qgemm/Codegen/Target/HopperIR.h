//===- HopperIR.h - sm_90a primitives: TMA, mbarriers, wgmma ---*- C++ -*-===//
//
// The pieces a warp-specialized Hopper kernel is made of, as IR builders on
// top of KernelIR: dynamic shared memory carved into stages, mbarrier
// init/arrive/wait, 2D/3D TMA tile loads, K-major 128B-swizzled wgmma
// descriptors, the m64nNk32 FP8 wgmma, and register reallocation. They
// build the Hopper stage: NVVM ops, and qgemm's own Hopper-stage ops where
// NVVM has none (wgmmaDescriptor, wgmmaWait, threadIdXInPlace; lowered by
// HopperToNVVM.cpp). No other file builds NVVM ops. The target layer:
// every kernel (each GEMM family, quantize, dispatch, SwiGLU) builds its
// target code from here, so none reaches into another's folder.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_CODEGEN_TARGET_HOPPERIR_H
#define QGEMM_CODEGEN_TARGET_HOPPERIR_H

#include "qgemm/Codegen/IRHelpers.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::qgemm {

class HopperIR {
public:
  explicit HopperIR(KernelIR &ir) : ir(ir), b(ir.builder()) {}

  Type sharedPtrT();
  /// Byte `offset` (i32) into dynamic shared memory.
  Value smemAt(Value base, Value offset);
  /// The 32-bit shared-window address of a shared pointer.
  Value sharedAddress(Value ptr);

  void mbarrierInit(Value bar, int64_t count);
  /// Block until the phase with parity `parity` (i32 0/1) of `bar` completed.
  void mbarrierWait(Value bar, Value parity);
  void mbarrierArrive(Value bar);
  void mbarrierArriveExpectTx(Value bar, int64_t bytes);

  /// cp.async of 4 bytes from global `src` to shared `dst` (L1-cached),
  /// reading `srcBytes` (i32, 4 or 0) of them and zero-filling the rest.
  void cpAsync4(Value dst, Value src, Value srcBytes);
  /// Make `bar` expect one arrival when this thread's earlier cp.asyncs have
  /// landed; the arrival counts toward the barrier's initial count.
  void cpAsyncArriveNoinc(Value bar);

  /// TMA tile load of `coords` (innermost first) through the tensor map at
  /// generic pointer `map` into `dst`, completing on `bar`. With a
  /// `multicastMask` (i16), the tile lands at the same offset, completing on
  /// the same barrier, in every CTA of the cluster the mask names.
  void tmaLoad(Value dst, Value map, ValueRange coords, Value bar,
               Value multicastMask = Value());

  /// TMA tile store of shared `src` to `coords` (innermost first) of the
  /// tensor map at generic pointer `map`, in this thread's current bulk
  /// group; boxes past the map's extent are clipped.
  void tmaStore(Value map, Value src, ValueRange coords);
  /// Closes this thread's bulk group of TMA stores.
  void bulkCommit();
  /// Waits until this thread's bulk groups have read their shared sources
  /// (`readOnly`) or completed their writes.
  void bulkWait(bool readOnly);
  /// Orders this thread's generic shared-memory writes before later reads
  /// by the async proxy (TMA, wgmma).
  void fenceProxyAsyncShared();

  /// fence.mbarrier_init: orders this thread's mbarrier inits before other
  /// threads' (and the cluster's) use of the barriers.
  void fenceMbarrierInit();
  /// bar.sync 0 by every thread of the CTA (__syncthreads).
  void syncThreads();
  /// bar.sync on named barrier `id` (i32, 1-15) by `threads` (i32) threads.
  void namedBarrier(Value id, Value threads);
  /// setmaxnreg: raise (`increase`) or lower this warpgroup's registers per
  /// thread to `registers`.
  void setMaxRegisters(int registers, bool increase);

  /// %ctaid.x, .y, .z and %nctaid.x.
  Value blockIdX();
  Value blockIdY();
  Value blockIdZ();
  Value gridDimX();
  /// %laneid, and %lanemask_lt (the lanes below this one).
  Value laneId();
  Value laneMaskLt();
  /// vote.sync.ballot over the whole warp: a 32-bit mask of the lanes whose
  /// `pred` (i1) is true.
  Value ballot(Value pred);
  /// shfl.sync of `v` (i32 or f32) over the whole warp, `offset` lanes away
  /// in `kind`'s direction, clamped at lane `clamp`.
  Value shfl(NVVM::ShflKind kind, Value v, int offset, int clamp);
  /// bar.red.or: __syncthreads that returns, to every thread, the OR of
  /// `value` (i32, 0 or 1) over the CTA.
  Value syncThreadsOr(Value value);
  /// cvt.rn.satfinite of two f32 to an FP8 pair (i16; `hi` in the upper
  /// byte), `fp8T` the FP8 type.
  Value cvtF32x2ToFp8x2(Value hi, Value lo, Type fp8T);

  /// %cluster_ctaid.x: this CTA's index in its (x-only) cluster.
  Value clusterCtaRank();
  /// barrier.cluster arrive + wait by every thread of every CTA of the
  /// cluster (also orders the mbarrier inits before remote use).
  void clusterSync();
  /// Arrive on the mbarrier at `bar`'s offset in cluster CTA `rank`.
  void mbarrierArriveRemote(Value bar, Value rank);

  /// Descriptor of a K-major tile whose rows of `swizzleBytes` are swizzled
  /// in 8-row atoms `atomBytes` apart (WgmmaLayout says which).
  Value wgmmaDescriptor(Value sharedAddr32, int64_t atomBytes,
                        int64_t swizzleBytes);

  /// The f32 accumulator struct of an m64nNk32 wgmma: n/2 floats a thread.
  Type accumulatorT(int64_t n);
  /// D (+)= A.B over one k32 slice; `accumulate` false overwrites D.
  Value wgmma(Value acc, Value descA, Value descB, int64_t n,
              ::qgemm::ElemType a, ::qgemm::ElemType bType, bool accumulate);

  /// wgmma.fence: orders earlier register and shared-memory accesses before
  /// the wgmmas that follow.
  void wgmmaFence();
  /// wgmma.commit_group: closes the wgmmas issued since the last one into a
  /// group (wgmmaWait counts groups).
  void wgmmaCommitGroup();
  /// stmatrix.m8n8.x{regs.size()}.b16: lane l gives the address of row
  /// l % 8 of matrix l / 8; `regs` (i32, two bf16 each) are this thread's
  /// fragment words, one per matrix.
  void stMatrix(Value at, ValueRange regs);

  /// Waits until at most `pending` wgmma groups are in flight and returns
  /// `frag` (an accumulator struct) as defined by that wait.
  Value wgmmaWait(int pending, Value frag);
  /// threadIdx.x read where it is emitted: loop-invariant code motion
  /// cannot hoist it (nor what is computed from it) out of the tile loop,
  /// where it would stay live across the register-bound mainloop.
  Value threadIdXInPlace();
  Value threadIdX();

  /// Kernel attributes of `fn`: a kernel entry of `threads` threads with a
  /// register cap at entry (minctasm 1: it makes setmaxnreg take effect),
  /// in clusters of `cluster` CTAs (x only) when above 1.
  static void markKernel(LLVM::LLVMFuncOp fn, int threads, int cluster);
  /// Parameter `i` of `fn` is a CUtensorMap (128 bytes, 64-aligned) passed
  /// by value as a __grid_constant__, so TMA can address it in place.
  static void markTensorMapParam(LLVM::LLVMFuncOp fn, unsigned i);

private:
  KernelIR &ir;
  ImplicitLocOpBuilder &b;
};

/// The Hopper-stage ops HopperIR builds where NVVM has none
/// (qgemm.wgmma_descriptor, qgemm.wgmma_wait, qgemm.pinned_thread_id)
/// replaced by their NVVM / LLVM code, under `root` (HopperToNVVM.cpp): the
/// lowering of the target stage a family registers.
LogicalResult lowerHopperOps(Operation *root);

} // namespace mlir::qgemm

#endif // QGEMM_CODEGEN_TARGET_HOPPERIR_H
