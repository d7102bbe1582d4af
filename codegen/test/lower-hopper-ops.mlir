// RUN: qgemm-opt %s -qgemm-lower-to-nvvm | FileCheck %s

// qgemm's Hopper-stage ops become NVVM / LLVM in qgemm-lower-to-nvvm.
// CHECK-LABEL: llvm.func @hopper(
llvm.func @hopper(%addr: i32, %frag: !llvm.struct<(f32, f32)>) -> !llvm.struct<(f32, f32)> {
  // The descriptor: (addr >> 4) & 0x3FFF, leading byte offset 1 (bit 16),
  // stride 1024 >> 4 = 64 (bits 32-45), 128B swizzle (code 1, bits 62-63):
  // 0x4000004000010000.
  // CHECK: %[[SH:.*]] = arith.shrui %{{.*}}, %c4_i32
  // CHECK: %[[LO:.*]] = arith.andi %[[SH]], %c16383_i32
  // CHECK: %[[EXT:.*]] = arith.extui %[[LO]] : i32 to i64
  // CHECK: arith.ori %[[EXT]], %c4611686293305360384_i64
  %d = qgemm.wgmma_descriptor %addr {atom_bytes = 1024 : i64, swizzle_bytes = 128 : i64}
  // The wait defines the fragment's registers: tied operands of one asm.
  // CHECK: %[[R0:.*]] = llvm.extractvalue %{{.*}}[0]
  // CHECK: %[[R1:.*]] = llvm.extractvalue %{{.*}}[1]
  // CHECK: llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 1;", "=f,=f,0,1" %[[R0]], %[[R1]]
  %w = qgemm.wgmma_wait %frag {pending = 1 : i64} : !llvm.struct<(f32, f32)> -> !llvm.struct<(f32, f32)>
  // CHECK: llvm.inline_asm has_side_effects "mov.u32 $0, %tid.x;", "=r"
  %t = qgemm.pinned_thread_id
  // CHECK-NOT: qgemm.
  llvm.return %w : !llvm.struct<(f32, f32)>
}
