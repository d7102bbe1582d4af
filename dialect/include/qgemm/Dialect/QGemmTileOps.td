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
    $smem `,` $tid `tile` `(` $tile `)` attr-dict `:` type($smem) `,` type($tile)
  }];
}

def QGemm_FillGroupTableOp : QGemm_TileOp<"fill_group_table"> {
  let summary = "write the row_group kernels' table of group end rows";
  let arguments = (ins AnyType:$smem, I32:$tid, Variadic<AnyType>:$tile,
                       StrArrayAttr:$tile_fields);
  let assemblyFormat = [{
    $smem `,` $tid `tile` `(` $tile `)` attr-dict `:` type($smem) `,` type($tile)
  }];
}

def QGemm_CountTilesOp : QGemm_TileOp<"count_tiles"> {
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
    $smem `tile` `(` $tile `)` attr-dict `:` type($smem) `,` type($tile)
    `->` type($values)
  }];
}

def QGemm_NextTileOp : QGemm_TileOp<"next_tile"> {
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
    $smem `,` $index `tile` `(` $tile `)` attr-dict `:` type($smem) `,`
    type($tile) `->` type($values)
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
    $smem `,` $group `tile` `(` $tile `)` attr-dict `:` type($smem) `,`
    type($tile)
  }];
}

def QGemm_LoadTileOp : QGemm_TileOp<"load_tile"> {
  let summary = "the producer's loads of one tile, a K block a stage";
  let description = [{
    Per K block of the tile: wait for the stage's empty barrier, then the
    TMA loads of the A and B tiles and the copies of their scales into the
    stage, completing on its full barrier. `it` is the CTA's running count
    of K blocks, which picks the stage and the barrier phase.
  }];
  let arguments = (ins AnyType:$smem, I32:$it, I32:$tid,
                       Variadic<AnyType>:$tile, StrArrayAttr:$tile_fields);
  let assemblyFormat = [{
    $smem `,` $it `,` $tid `tile` `(` $tile `)` attr-dict `:` type($smem) `,`
    type($tile)
  }];
}

def QGemm_MmaTileOp : QGemm_TileOp<"mma_tile"> {
  let summary = "a consumer warpgroup's accumulators of one tile";
  let description = [{
    Per K block: wait for the stage's full barrier, wgmma over it, release
    it, and promote the block's product into the f32 accumulators with its
    scales (per k32 step for MXFP8). Results: blockN / 2 f32 a thread.
  }];
  let arguments = (ins AnyType:$smem, I32:$it, I32:$consumer,
                       I32:$tid_in_warpgroup, I32:$row_in_tile, I32:$lane,
                       Variadic<AnyType>:$tile, StrArrayAttr:$tile_fields);
  let results = (outs Variadic<F32>:$acc);
  let assemblyFormat = [{
    $smem `,` $it `,` $consumer `,` $tid_in_warpgroup `,` $row_in_tile `,`
    $lane `tile` `(` $tile `)` attr-dict `:` type($smem) `,` type($tile)
    `->` type($acc)
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
    $smem `,` $lane `,` $row0 `,` $row1 `acc` `(` $acc `)` `tile` `(` $tile `)`
    attr-dict `:` type($smem) `,` type($tile)
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
