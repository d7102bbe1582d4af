//===- QGemmHopperOps.td - The Hopper-only ops of the wgmma kernel -*- tablegen -*-===//
//
// What only a Hopper (sm_90a) kernel has: the consumers' warpgroup MMAs and
// the promotion of their fragments into the f32 accumulators, at tile
// level beside the generic walk and stage ops (QGemmTileOps.td), and the
// three ops of the Hopper stage that NVVM lacks (qgemm-lower-tiles-to-hopper
// emits them, qgemm-lower-to-nvvm lowers them).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_HOPPER_OPS_TD
#define QGEMM_HOPPER_OPS_TD

include "qgemm/Dialect/QGemmTileType.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// A wgmma accumulator fragment: the LLVM struct of its f32 registers.
def QGemm_Fragment : Type<
    CPred<"::llvm::isa<::mlir::LLVM::LLVMStructType>($_self)">,
    "LLVM struct of a wgmma fragment's registers">;

//===----------------------------------------------------------------------===//
// Tile level: wgmma and promotion.
//===----------------------------------------------------------------------===//

def QGemm_MmaBlockOp : QGemm_Op<"mma_block"> {
  let summary = "a consumer warpgroup's product of one stage, complete";
  let description = [{
    The k32 wgmma steps [first, first + count) of stage `stage` over the
    tile's width, as one wgmma group into a fresh f32 fragment, and the
    wait for it. The consumer's 64 rows of A start at its own offset.
  }];
  let arguments = (ins QGemm_SharedMemory:$smem, I32:$stage, I32:$consumer,
                       I64Attr:$first, I64Attr:$count, QGemm_TileType:$tile);
  let results = (outs QGemm_Fragment:$fragment);
  let assemblyFormat = [{
    $smem `,` $stage `,` $consumer `tile` $tile attr-dict `:` type($smem)
    `,` qualified(type($tile)) `->` type($fragment)
  }];
}

def QGemm_MmaIssueOp : QGemm_Op<"mma_issue"> {
  let summary = "a consumer warpgroup's product of one stage, in flight";
  let description = [{
    qgemm.mma_block without its wait: the k32 wgmma steps [first, first +
    count) of stage `stage` as one committed wgmma group into a fresh
    fragment, whose registers hold the product only once a
    qgemm.wgmma_wait has retired the group. In between, the warpgroup may
    run code that neither reads nor writes the fragment (the promotion of
    the block before it: Mainloop's deferred promotion).
  }];
  let arguments = (ins QGemm_SharedMemory:$smem, I32:$stage, I32:$consumer,
                       I64Attr:$first, I64Attr:$count, QGemm_TileType:$tile);
  let results = (outs QGemm_Fragment:$fragment);
  let assemblyFormat = [{
    $smem `,` $stage `,` $consumer `tile` $tile attr-dict `:` type($smem)
    `,` qualified(type($tile)) `->` type($fragment)
  }];
}

def QGemm_PromoteOp : QGemm_Op<"promote", [AttrSizedOperandSegments]> {
  let summary = "acc += fragment * scales, per accumulator";
  let description = [{
    Each accumulator takes its row's scale from `scales` (block_scales'
    four results), the second B scale past the tile's 128-column boundary
    (the tile's boundary field); the weight gradient multiplies in its
    column's B scale from the stage.
  }];
  let arguments = (ins QGemm_SharedMemory:$smem, QGemm_Fragment:$fragment, I32:$stage,
                       I32:$lane, Variadic<F32>:$scales, Variadic<F32>:$acc,
                       QGemm_TileType:$tile);
  let results = (outs Variadic<F32>:$result);
  let assemblyFormat = [{
    $smem `,` $fragment `,` $stage `,` $lane `scales` `(` $scales `)`
    `acc` `(` $acc `)` `tile` $tile attr-dict `:` type($smem) `,`
    qualified(type($tile)) `,` type($fragment) `->` type($result)
  }];
}

def QGemm_MmaTileOp : QGemm_Op<"mma_tile"> {
  let summary = "a consumer warpgroup's MXFP8 accumulators of one tile";
  let description = [{
    MXFP8 (1x32 scales): per K block, wait for the stage's full barrier,
    then per k32 step a wgmma and its promotion with the step's scales,
    skipping the steps past a group's last token; release the stage.
    (The 1x128 kernels' K loop is spelled out at tile level instead:
    qgemm.wait_stage, qgemm.block_scales, qgemm.mma_block,
    qgemm.release_stage, qgemm.promote; docs/ARCHITECTURE.md, "Stages",
    says why this one stays whole.) Results: blockN / 2 f32 a thread.
  }];
  let arguments = (ins QGemm_SharedMemory:$smem, I32:$it, I32:$consumer,
                       I32:$tid_in_warpgroup, I32:$row_in_tile, I32:$lane,
                       QGemm_TileType:$tile);
  let results = (outs Variadic<F32>:$acc);
  let assemblyFormat = [{
    $smem `,` $it `,` $consumer `,` $tid_in_warpgroup `,` $row_in_tile `,`
    $lane `tile` $tile attr-dict `:` type($smem) `,` qualified(type($tile))
    `->` type($acc)
  }];
}

//===----------------------------------------------------------------------===//
// The Hopper stage's own ops: what the NVVM dialect has no op for.
//===----------------------------------------------------------------------===//

def QGemm_WgmmaDescriptorOp : QGemm_Op<"wgmma_descriptor", [Pure]> {
  let summary = "the 64-bit shared-memory matrix descriptor of a wgmma operand";
  let description = [{
    A K-major tile at shared address `address` (32-bit) whose rows of
    `swizzle_bytes` are swizzled in 8-row atoms `atom_bytes` apart.
  }];
  let arguments = (ins I32:$address, I64Attr:$atom_bytes,
                       I64Attr:$swizzle_bytes);
  let results = (outs I64:$descriptor);
  let assemblyFormat = "$address attr-dict";
}

def QGemm_WgmmaWaitOp : QGemm_Op<"wgmma_wait"> {
  let summary = "wgmma.wait_group that defines the fragment it waits for";
  let description = [{
    Waits until at most `pending` wgmma groups are in flight. The result is
    `fragment` as of the wait: no read of it can move above the wait (the
    NVVM wait op has no operands and orders memory only).
  }];
  let arguments = (ins QGemm_Fragment:$fragment, I64Attr:$pending);
  let results = (outs QGemm_Fragment:$result);
  let assemblyFormat = "$fragment attr-dict `:` type($fragment) `->` type($result)";
}

def QGemm_PinnedThreadIdOp : QGemm_Op<"pinned_thread_id"> {
  let summary = "%tid.x read where it stands";
  let description = [{
    Loop-invariant code motion cannot hoist it, nor what is computed from
    it, out of the tile loop, where it would stay live across the
    register-bound mainloop.
  }];
  let results = (outs I32:$tid);
  let assemblyFormat = "attr-dict";
}

#endif // QGEMM_HOPPER_OPS_TD
