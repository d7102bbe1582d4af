//===- QGemmTileOps.td - The tile-level ops of a grouped GEMM ----*- tablegen -*-===//
//
// The ops a wgmma-family grouped GEMM passes through between its
// declaration and NVVM:
//
//   qgemm-lower-to-tiles         the declaration gains a tile-level body: a
//                                persistent tile loop per warpgroup role
//                                (producer, consumers) over these ops and
//                                the Hopper ones (QGemmHopperOps.td)
//   qgemm-lower-tiles-to-hopper  each tile op becomes its Hopper code (scf,
//                                arith, llvm and nvvm ops: mbarriers, TMA,
//                                wgmma.mma_async), plus the three
//                                Hopper-stage ops that NVVM lacks
//   qgemm-lower-to-nvvm          those three become NVVM / LLVM
//
// This file holds the ops of the walk and of the stage ring, which name no
// instruction set. A tile op takes the tile it works on as one value of the
// tile type (QGemmTileType.td): the CTA-wide fields come from
// qgemm.count_tiles, the per-tile ones from qgemm.next_tile, and
// qgemm.make_tile adds what a role computes itself.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_TILE_OPS_TD
#define QGEMM_TILE_OPS_TD

include "qgemm/Dialect/QGemmTileType.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Tile values.
//===----------------------------------------------------------------------===//

def QGemm_MakeTileOp : QGemm_Op<"make_tile",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "a tile from its field values, or `base` with more fields";
  let description = [{
    The result's fields are those of `base` (if any) and one per value,
    named in the text, in the result type's order:

    ```mlir
    %cta = qgemm.make_tile (rank = %c0, rows = %rows) : !qgemm.tile<rank: i32, rows: i32>
    %t2 = qgemm.make_tile %t (boundary = %b) : !qgemm.tile<..., boundary: i32>
    ```

    The Hopper lowering reads a tile's fields through the make_tile ops
    that define it: it replaces qgemm.count_tiles and qgemm.next_tile by
    make_tile ops of the values it computed.
  }];
  let arguments = (ins Optional<QGemm_TileType>:$base,
                       Variadic<AnySignlessInteger>:$values);
  let results = (outs QGemm_TileType:$tile);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The result's fields that the values give (those `base` lacks), in
    /// the values' order.
    ::llvm::SmallVector<TileField> getValueFields();
  }];
}

def QGemm_TileFieldOp : QGemm_Op<"tile_field",
    [Pure, DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "the value of one field of a tile";
  let description = [{
    `%kBlockCount = qgemm.tile_field %tile[kBlockCount] : !qgemm.tile<...>`;
    the result has the field's type and prints under the field's name.
  }];
  let arguments = (ins QGemm_TileType:$tile, StrAttr:$field);
  let results = (outs AnySignlessInteger:$value);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// The walk.
//===----------------------------------------------------------------------===//

def QGemm_InitBarriersOp : QGemm_Op<"init_barriers"> {
  let summary = "initialize the stage ring's full and empty mbarriers";
  let description = [{
    Thread `tid` 0 of the CTA initializes every stage's barriers, then the
    CTA synchronizes.
  }];
  let arguments = (ins QGemm_SharedMemory:$smem, I32:$tid, QGemm_TileType:$tile);
  let assemblyFormat = [{
    $smem `,` $tid `tile` $tile attr-dict `:` type($smem) `,`
    qualified(type($tile))
  }];
}

def QGemm_FillGroupTableOp : QGemm_Op<"fill_group_table"> {
  let summary = "write the row_group kernels' table of group end rows";
  let arguments = (ins QGemm_SharedMemory:$smem, I32:$tid, QGemm_TileType:$tile);
  let assemblyFormat = [{
    $smem `,` $tid `tile` $tile attr-dict `:` type($smem) `,`
    qualified(type($tile))
  }];
}

def QGemm_CountTilesOp : QGemm_Op<"count_tiles",
    [DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "the launch's tile count and the walk's CTA-wide extents";
  let description = [{
    The result is `tile` with CTA-wide fields added: numTiles, nBlocks,
    nUnits, mBlocks, mUnits and, when the walk skips blocks without rows,
    validBlocks.
  }];
  let arguments = (ins QGemm_SharedMemory:$smem, QGemm_TileType:$tile);
  let results = (outs QGemm_TileType:$cta);
  let assemblyFormat = [{
    $smem `tile` $tile attr-dict `:` type($smem) `,` qualified(type($tile))
    `->` qualified(type($cta))
  }];
  let hasVerifier = 1;
}

def QGemm_NextTileOp : QGemm_Op<"next_tile",
    [DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "the coordinates, group and extent of the walk's tile `index`";
  let description = [{
    The result is the CTA's `tile` with per-tile fields added: the tile's
    m- and n-block, its group, valid rows, padding flags, K block count
    and, per grouping, its first row, group end and token range.
  }];
  let arguments = (ins QGemm_SharedMemory:$smem, I32:$index, QGemm_TileType:$tile);
  let results = (outs QGemm_TileType:$next);
  let assemblyFormat = [{
    $smem `,` $index `tile` $tile attr-dict `:` type($smem) `,`
    qualified(type($tile)) `->` qualified(type($next))
  }];
  let hasVerifier = 1;
}

def QGemm_TokenScaleBlocksOp : QGemm_Op<"token_scale_blocks"> {
  let summary = "the token scale blocks of the groups before `group`";
  let description = [{
    k_contiguous with token scale blocks restarting at each group:
    start(group), or Tb for group = the group count (LAYOUTS.md,
    "Grouping").
  }];
  let arguments = (ins QGemm_SharedMemory:$smem, I32:$group, QGemm_TileType:$tile);
  let results = (outs I32:$blocks);
  let assemblyFormat = [{
    $smem `,` $group `tile` $tile attr-dict `:` type($smem) `,`
    qualified(type($tile))
  }];
}

//===----------------------------------------------------------------------===//
// The stage ring: the producer's loads, the consumers' waits and releases,
// the stores of D.
//===----------------------------------------------------------------------===//

def QGemm_AcquireStageOp : QGemm_Op<"acquire_stage"> {
  let summary = "the producer's wait until stage `stage` is empty";
  let description = [{
    Blocks until the consumers released the stage for the K block whose
    full-barrier phase is `phase`: the empty barrier's phase before it (a
    fresh barrier counts as having completed the phase before phase 0, so
    the first pass over the ring does not wait).
  }];
  let arguments = (ins QGemm_SharedMemory:$smem, I32:$stage, I32:$phase,
                       QGemm_TileType:$tile);
  let assemblyFormat = [{
    $smem `,` $stage `,` $phase `tile` $tile attr-dict `:` type($smem) `,`
    qualified(type($tile))
  }];
}

def QGemm_LoadStageOp : QGemm_Op<"load_stage"> {
  let summary = "the producer's loads of one K block into stage `stage`";
  let description = [{
    The TMA loads of the A tile (rows from `m0`) and the B tile (columns
    from `n0`) at contraction index `k0` (multicast in a cluster), and the
    copies of their scales for K block `k_block`, completing on the stage's
    full barrier.
  }];
  let arguments = (ins QGemm_SharedMemory:$smem, I32:$stage, I32:$k_block, I32:$k0,
                       I32:$m0, I32:$n0, I32:$tid, QGemm_TileType:$tile);
  let assemblyFormat = [{
    $smem `,` $stage `,` $k_block `,` $k0 `,` $m0 `,` $n0 `,` $tid
    `tile` $tile attr-dict `:` type($smem) `,` qualified(type($tile))
  }];
}

def QGemm_LoadTileOp : QGemm_Op<"load_tile"> {
  let summary = "the producer's loads of one tile, scales held in registers";
  let description = [{
    The weight gradient with 1x128 COMPACT scales on both operands: per K
    block of the tile, acquire the stage, TMA the A and B tiles, and store
    the block's scales from registers, which load four K blocks at a time
    ahead of the wait. `it` is the CTA's running count of K blocks, which
    picks the stage and the barrier phase. (The other kernels spell this
    loop out at tile level: qgemm.acquire_stage, qgemm.load_stage;
    docs/ARCHITECTURE.md, "Stages", says why this one stays whole.)
  }];
  let arguments = (ins QGemm_SharedMemory:$smem, I32:$it, I32:$tid,
                       QGemm_TileType:$tile);
  let assemblyFormat = [{
    $smem `,` $it `,` $tid `tile` $tile attr-dict `:` type($smem) `,`
    qualified(type($tile))
  }];
}

def QGemm_WaitStageOp : QGemm_Op<"wait_stage"> {
  let summary = "a consumer's wait until stage `stage` is full";
  let description = [{
    Blocks until the phase `phase` (0 or 1) of the stage's full barrier
    completed: the stage holds the K block's tiles and scales.
  }];
  let arguments = (ins QGemm_SharedMemory:$smem, I32:$stage, I32:$phase,
                       QGemm_TileType:$tile);
  let assemblyFormat = [{
    $smem `,` $stage `,` $phase `tile` $tile attr-dict `:` type($smem) `,`
    qualified(type($tile))
  }];
}

def QGemm_BlockScalesOp : QGemm_Op<"block_scales"> {
  let summary = "the scale factors of a K block for the thread's two rows";
  let description = [{
    Forward: scale_a * scale_b with the tile's first B scale (row0, row1)
    and, for a tile straddling a 128-column boundary, its second (row0_hi,
    row1_hi). Weight gradient: the A scales alone (B's are per column, read
    by qgemm.promote).
  }];
  let arguments = (ins QGemm_SharedMemory:$smem, I32:$stage, I32:$row_in_tile,
                       QGemm_TileType:$tile);
  let results = (outs F32:$scale_row0, F32:$scale_row1, F32:$scale_row0_hi,
                      F32:$scale_row1_hi);
  let assemblyFormat = [{
    $smem `,` $stage `,` $row_in_tile `tile` $tile attr-dict `:`
    type($smem) `,` qualified(type($tile))
  }];
}

def QGemm_ZeroTokenTailOp : QGemm_Op<"zero_token_tail"> {
  let summary = "zero the stage's tokens past the group's last one";
  let description = [{
    k_contiguous, the group's last K block when it is partial: the TMA
    boxes also brought in tokens of the next group, which must contribute
    nothing. Both consumer warpgroups zero them in A and B, then meet at a
    named barrier. Reads the tile's tailTokens.
  }];
  let arguments = (ins QGemm_SharedMemory:$smem, I32:$stage, I32:$consumer,
                       I32:$tid_in_warpgroup, QGemm_TileType:$tile);
  let assemblyFormat = [{
    $smem `,` $stage `,` $consumer `,` $tid_in_warpgroup `tile` $tile
    attr-dict `:` type($smem) `,` qualified(type($tile))
  }];
}

def QGemm_ReleaseStageOp : QGemm_Op<"release_stage"> {
  let summary = "a consumer thread's arrive on stage `stage`'s empty barrier";
  let description = [{
    After its last read of the stage; in a cluster, one thread of each
    warpgroup also arrives on every peer's barrier (their producers
    multicast into this CTA's stage), which takes the tile's rank.
  }];
  let arguments = (ins QGemm_SharedMemory:$smem, I32:$stage, I32:$tid_in_warpgroup,
                       QGemm_TileType:$tile);
  let assemblyFormat = [{
    $smem `,` $stage `,` $tid_in_warpgroup `tile` $tile attr-dict `:`
    type($smem) `,` qualified(type($tile))
  }];
}

def QGemm_StoreTileOp : QGemm_Op<"store_tile"> {
  let summary = "a consumer warpgroup's stores of its rows of D";
  let description = [{
    Rows masked per grouping; bf16 D staged through shared memory (out by
    16-byte chunks or TMA), f32 D from registers.
  }];
  let arguments = (ins QGemm_SharedMemory:$smem, Variadic<F32>:$acc, I32:$lane,
                       I32:$row0, I32:$row1, QGemm_TileType:$tile);
  let assemblyFormat = [{
    $smem `,` $lane `,` $row0 `,` $row1 `acc` `(` $acc `)` `tile` $tile
    attr-dict `:` type($smem) `,` qualified(type($tile))
  }];
}

#endif // QGEMM_TILE_OPS_TD
