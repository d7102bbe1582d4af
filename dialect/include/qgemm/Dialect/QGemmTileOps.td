//===- QGemmTileOps.td - The wgmma kernel's tile and Hopper stages -*- tablegen -*-===//
//
// The ops a wgmma-family grouped GEMM passes through between its
// declaration and NVVM:
//
//   qgemm-lower-to-tiles         the declaration gains a tile-level body: a
//                                persistent tile loop per warpgroup role
//                                (producer, consumers) over these ops
//   qgemm-lower-tiles-to-hopper  each tile op becomes its Hopper code (scf,
//                                arith, llvm and nvvm ops: mbarriers, TMA,
//                                wgmma.mma_async), plus the three
//                                Hopper-stage ops below that NVVM lacks
//   qgemm-lower-to-nvvm          those three become NVVM / LLVM
//
// A tile op reads the tile's coordinates as SSA values: `tile` holds them,
// and `tile_fields` names each one (the names of the wgmma lowering's
// TileValues, qgemm/Dialect/TileFields.def). The CTA-wide ones come
// from qgemm.count_tiles, the per-tile ones from qgemm.next_tile.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_TILE_OPS_TD
#define QGEMM_TILE_OPS_TD

include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class QGemm_TileOp<string mnemonic, list<Trait> traits = []>
    : QGemm_Op<mnemonic, traits> {
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return ::mlir::qgemm::verifyTileValues(getOperation(), getTile(),
                                             getTileFields());
    }
  }];
}

def QGemm_InitBarriersOp : QGemm_TileOp<"init_barriers"> {
  let summary = "initialize the stage ring's full and empty mbarriers";
  let description = [{
    Thread `tid` 0 of the CTA initializes every stage's barriers, then the
    CTA synchronizes.
  }];
  let arguments = (ins AnyType:$smem, I32:$tid, Variadic<AnyType>:$tile,
                       StrArrayAttr:$tile_fields);
  let assemblyFormat = [{
    $smem `,` $tid
    `tile` custom<TileValues>($tile, type($tile), $tile_fields)
    attr-dict `:` type($smem)
  }];
}

def QGemm_FillGroupTableOp : QGemm_TileOp<"fill_group_table"> {
  let summary = "write the row_group kernels' table of group end rows";
  let arguments = (ins AnyType:$smem, I32:$tid, Variadic<AnyType>:$tile,
                       StrArrayAttr:$tile_fields);
  let assemblyFormat = [{
    $smem `,` $tid
    `tile` custom<TileValues>($tile, type($tile), $tile_fields)
    attr-dict `:` type($smem)
  }];
}

def QGemm_CountTilesOp : QGemm_TileOp<"count_tiles",
    [DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "the launch's tile count and the walk's CTA-wide extents";
  let description = [{
    Results are named by `result_fields` (numTiles, nBlocks, nUnits,
    mBlocks, mUnits and, when the walk skips blocks without rows,
    validBlocks).
  }];
  let arguments = (ins AnyType:$smem, Variadic<AnyType>:$tile,
                       StrArrayAttr:$tile_fields, StrArrayAttr:$result_fields);
  let results = (outs Variadic<I32>:$values);
  let assemblyFormat = [{
    $smem
    `tile` custom<TileValues>($tile, type($tile), $tile_fields)
    attr-dict `:` type($smem)
    `->` custom<TileResults>(type($values), $result_fields)
  }];
}

def QGemm_NextTileOp : QGemm_TileOp<"next_tile",
    [DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "the coordinates, group and extent of the walk's tile `index`";
  let description = [{
    Results are named by `result_fields`: the tile's m- and n-block, its
    group, valid rows, padding flags, K block count and, per grouping, its
    first row, group end and token range.
  }];
  let arguments = (ins AnyType:$smem, I32:$index, Variadic<AnyType>:$tile,
                       StrArrayAttr:$tile_fields, StrArrayAttr:$result_fields);
  let results = (outs Variadic<AnyType>:$values);
  let assemblyFormat = [{
    $smem `,` $index
    `tile` custom<TileValues>($tile, type($tile), $tile_fields)
    attr-dict `:` type($smem)
    `->` custom<TileResults>(type($values), $result_fields)
  }];
}

def QGemm_TokenScaleBlocksOp : QGemm_TileOp<"token_scale_blocks"> {
  let summary = "the token scale blocks of the groups before `group`";
  let description = [{
    k_contiguous with token scale blocks restarting at each group:
    start(group), or Tb for group = the group count (LAYOUTS.md,
    "Grouping").
  }];
  let arguments = (ins AnyType:$smem, I32:$group, Variadic<AnyType>:$tile,
                       StrArrayAttr:$tile_fields);
  let results = (outs I32:$blocks);
  let assemblyFormat = [{
    $smem `,` $group
    `tile` custom<TileValues>($tile, type($tile), $tile_fields)
    attr-dict `:` type($smem)
  }];
}

def QGemm_AcquireStageOp : QGemm_TileOp<"acquire_stage"> {
  let summary = "the producer's wait until stage `stage` is empty";
  let description = [{
    Blocks until the consumers released the stage for the K block whose
    full-barrier phase is `phase`: the empty barrier's phase before it (a
    fresh barrier counts as having completed the phase before phase 0, so
    the first pass over the ring does not wait).
  }];
  let arguments = (ins AnyType:$smem, I32:$stage, I32:$phase,
                       Variadic<AnyType>:$tile, StrArrayAttr:$tile_fields);
  let assemblyFormat = [{
    $smem `,` $stage `,` $phase
    `tile` custom<TileValues>($tile, type($tile), $tile_fields)
    attr-dict `:` type($smem)
  }];
}

def QGemm_LoadStageOp : QGemm_TileOp<"load_stage"> {
  let summary = "the producer's loads of one K block into stage `stage`";
  let description = [{
    The TMA loads of the A tile (rows from `m0`) and the B tile (columns
    from `n0`) at contraction index `k0` (multicast in a cluster), and the
    copies of their scales for K block `k_block`, completing on the stage's
    full barrier.
  }];
  let arguments = (ins AnyType:$smem, I32:$stage, I32:$k_block, I32:$k0,
                       I32:$m0, I32:$n0, I32:$tid, Variadic<AnyType>:$tile,
                       StrArrayAttr:$tile_fields);
  let assemblyFormat = [{
    $smem `,` $stage `,` $k_block `,` $k0 `,` $m0 `,` $n0 `,` $tid
    `tile` custom<TileValues>($tile, type($tile), $tile_fields)
    attr-dict `:` type($smem)
  }];
}

def QGemm_LoadTileOp : QGemm_TileOp<"load_tile"> {
  let summary = "the producer's loads of one tile, scales held in registers";
  let description = [{
    The weight gradient with 1x128 COMPACT scales on both operands: per K
    block of the tile, acquire the stage, TMA the A and B tiles, and store
    the block's scales from registers, which load four K blocks at a time
    ahead of the wait. `it` is the CTA's running count of K blocks, which
    picks the stage and the barrier phase. (The other kernels spell this
    loop out at tile level: qgemm.acquire_stage, qgemm.load_stage.)
  }];
  let arguments = (ins AnyType:$smem, I32:$it, I32:$tid,
                       Variadic<AnyType>:$tile, StrArrayAttr:$tile_fields);
  let assemblyFormat = [{
    $smem `,` $it `,` $tid
    `tile` custom<TileValues>($tile, type($tile), $tile_fields)
    attr-dict `:` type($smem)
  }];
}

def QGemm_MmaTileOp : QGemm_TileOp<"mma_tile"> {
  let summary = "a consumer warpgroup's MXFP8 accumulators of one tile";
  let description = [{
    MXFP8 (1x32 scales): per K block, wait for the stage's full barrier,
    then per k32 step a wgmma and its promotion with the step's scales,
    skipping the steps past a group's last token; release the stage.
    (The 1x128 kernels' K loop is spelled out at tile level instead:
    qgemm.wait_stage, qgemm.block_scales, qgemm.mma_block,
    qgemm.release_stage, qgemm.promote.) Results: blockN / 2 f32 a thread.
  }];
  let arguments = (ins AnyType:$smem, I32:$it, I32:$consumer,
                       I32:$tid_in_warpgroup, I32:$row_in_tile, I32:$lane,
                       Variadic<AnyType>:$tile, StrArrayAttr:$tile_fields);
  let results = (outs Variadic<F32>:$acc);
  let assemblyFormat = [{
    $smem `,` $it `,` $consumer `,` $tid_in_warpgroup `,` $row_in_tile `,`
    $lane
    `tile` custom<TileValues>($tile, type($tile), $tile_fields)
    attr-dict `:` type($smem)
    `->` type($acc)
  }];
}

def QGemm_WaitStageOp : QGemm_TileOp<"wait_stage"> {
  let summary = "a consumer's wait until stage `stage` is full";
  let description = [{
    Blocks until the phase `phase` (0 or 1) of the stage's full barrier
    completed: the stage holds the K block's tiles and scales.
  }];
  let arguments = (ins AnyType:$smem, I32:$stage, I32:$phase,
                       Variadic<AnyType>:$tile, StrArrayAttr:$tile_fields);
  let assemblyFormat = [{
    $smem `,` $stage `,` $phase
    `tile` custom<TileValues>($tile, type($tile), $tile_fields)
    attr-dict `:` type($smem)
  }];
}

def QGemm_BlockScalesOp : QGemm_TileOp<"block_scales"> {
  let summary = "the scale factors of a K block for the thread's two rows";
  let description = [{
    Forward: scale_a * scale_b with the tile's first B scale (row0, row1)
    and, for a tile straddling a 128-column boundary, its second (row0_hi,
    row1_hi). Weight gradient: the A scales alone (B's are per column, read
    by qgemm.promote).
  }];
  let arguments = (ins AnyType:$smem, I32:$stage, I32:$row_in_tile,
                       Variadic<AnyType>:$tile, StrArrayAttr:$tile_fields);
  let results = (outs F32:$scale_row0, F32:$scale_row1, F32:$scale_row0_hi,
                      F32:$scale_row1_hi);
  let assemblyFormat = [{
    $smem `,` $stage `,` $row_in_tile
    `tile` custom<TileValues>($tile, type($tile), $tile_fields)
    attr-dict `:` type($smem)
  }];
}

def QGemm_ZeroTokenTailOp : QGemm_TileOp<"zero_token_tail"> {
  let summary = "zero the stage's tokens past the group's last one";
  let description = [{
    k_contiguous, the group's last K block when it is partial: the TMA
    boxes also brought in tokens of the next group, which must contribute
    nothing. Both consumer warpgroups zero them in A and B, then meet at a
    named barrier.
  }];
  let arguments = (ins AnyType:$smem, I32:$stage, I32:$consumer,
                       I32:$tid_in_warpgroup, Variadic<AnyType>:$tile,
                       StrArrayAttr:$tile_fields);
  let assemblyFormat = [{
    $smem `,` $stage `,` $consumer `,` $tid_in_warpgroup
    `tile` custom<TileValues>($tile, type($tile), $tile_fields)
    attr-dict `:` type($smem)
  }];
}

def QGemm_MmaBlockOp : QGemm_TileOp<"mma_block"> {
  let summary = "a consumer warpgroup's product of one stage, complete";
  let description = [{
    The k32 wgmma steps [first, first + count) of stage `stage` over the
    tile's width, as one wgmma group into a fresh f32 fragment, and the
    wait for it. The consumer's 64 rows of A start at its own offset.
  }];
  let arguments = (ins AnyType:$smem, I32:$stage, I32:$consumer,
                       I64Attr:$first, I64Attr:$count,
                       Variadic<AnyType>:$tile, StrArrayAttr:$tile_fields);
  let results = (outs AnyType:$fragment);
  let assemblyFormat = [{
    $smem `,` $stage `,` $consumer
    `tile` custom<TileValues>($tile, type($tile), $tile_fields)
    attr-dict `:` type($smem) `->` type($fragment)
  }];
}

def QGemm_ReleaseStageOp : QGemm_TileOp<"release_stage"> {
  let summary = "a consumer thread's arrive on stage `stage`'s empty barrier";
  let description = [{
    After its last read of the stage; in a cluster, one thread of each
    warpgroup also arrives on every peer's barrier (their producers
    multicast into this CTA's stage).
  }];
  let arguments = (ins AnyType:$smem, I32:$stage, I32:$tid_in_warpgroup,
                       Variadic<AnyType>:$tile, StrArrayAttr:$tile_fields);
  let assemblyFormat = [{
    $smem `,` $stage `,` $tid_in_warpgroup
    `tile` custom<TileValues>($tile, type($tile), $tile_fields)
    attr-dict `:` type($smem)
  }];
}

def QGemm_PromoteOp : QGemm_TileOp<"promote", [AttrSizedOperandSegments]> {
  let summary = "acc += fragment * scales, per accumulator";
  let description = [{
    Each accumulator takes its row's scale from `scales` (block_scales'
    four results), the second B scale past the tile's 128-column boundary;
    the weight gradient multiplies in its column's B scale from the stage.
  }];
  let arguments = (ins AnyType:$smem, AnyType:$fragment, I32:$stage,
                       I32:$lane, Variadic<F32>:$scales, Variadic<F32>:$acc,
                       Variadic<AnyType>:$tile, StrArrayAttr:$tile_fields);
  let results = (outs Variadic<F32>:$result);
  let assemblyFormat = [{
    $smem `,` $fragment `,` $stage `,` $lane `scales` `(` $scales `)`
    `acc` `(` $acc `)`
    `tile` custom<TileValues>($tile, type($tile), $tile_fields)
    attr-dict `:` type($smem) `,`
    type($fragment) `->` type($result)
  }];
}

def QGemm_StoreTileOp : QGemm_TileOp<"store_tile", [AttrSizedOperandSegments]> {
  let summary = "a consumer warpgroup's stores of its rows of D";
  let description = [{
    Rows masked per grouping; bf16 D staged through shared memory (out by
    16-byte chunks or TMA), f32 D from registers.
  }];
  let arguments = (ins AnyType:$smem, Variadic<F32>:$acc, I32:$lane,
                       I32:$row0, I32:$row1, Variadic<AnyType>:$tile,
                       StrArrayAttr:$tile_fields);
  let assemblyFormat = [{
    $smem `,` $lane `,` $row0 `,` $row1 `acc` `(` $acc `)`
    `tile` custom<TileValues>($tile, type($tile), $tile_fields)
    attr-dict `:` type($smem)
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
  let arguments = (ins AnyType:$fragment, I64Attr:$pending);
  let results = (outs AnyType:$result);
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

#endif // QGEMM_TILE_OPS_TD
