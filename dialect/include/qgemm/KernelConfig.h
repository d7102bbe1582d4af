//===- KernelConfig.h - How one grouped GEMM kernel is built ------*- C++ -*-===//
//
// The configuration of a kernel: its family, tile, stage count, walk order,
// cluster and grid cap. It is resolved once, from the contract and the
// spec's tuning request (ResolveConfig.h), by the qgemm-resolve-config pass,
// which stores it on the op as a typed attribute; the lowering reads that
// attribute, the compiler returns it, the kernel cache stores it, and the
// runtime launches from the stored value. Nothing derives it a second time.
//
// A vocabulary type of the bottom layer, like Contract.h and Tuning.h: the
// dialect carries it as an attribute, and the kernel families (kernels/)
// say how it is chosen and what it implies (WgmmaLayout.h). Plain C++.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_KERNELCONFIG_H
#define QGEMM_KERNELCONFIG_H

#include "qgemm/Contract.h"
#include "qgemm/Export.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace qgemm {

/// The kernel families a grouped GEMM lowers to.
///  - Simt: one thread per output element; the reference kernel, correct for
///    every contract.
///  - Wgmma (sm_90a): TMA loads into a ring of shared-memory stages, one
///    producer and two consumer warpgroups, wgmma m64nNk32 with promotion
///    per scale block (WgmmaLayout.h).
enum class KernelFamily { Simt, Wgmma };

template <> struct EnumSpellings<KernelFamily> {
  static constexpr const char *what = "kernel family";
  static constexpr std::pair<KernelFamily, std::string_view> spellings[] = {
      {KernelFamily::Simt, "simt"}, {KernelFamily::Wgmma, "wgmma"}};
};
inline std::string_view toString(KernelFamily f) { return spellingOf(f); }

/// Threads per block of the SIMT kernel: one thread per output column.
constexpr int kSimtBlockThreads = 128;
/// Threads of a wgmma CTA: one producer and two consumer warpgroups.
constexpr int kWgmmaThreads = 384;

struct KernelConfig {
  KernelFamily family = KernelFamily::Simt;
  int blockM = 128, blockN = 128, blockK = 128;
  int stages = 6;
  int threads = kSimtBlockThreads;
  /// Tile order of the persistent walk: n-block fastest (else m-block).
  bool nFastest = true;
  /// CTAs per cluster. With 2, the pair takes adjacent n-blocks of one
  /// m-block and each CTA TMA-loads half of the shared A tile, multicast
  /// into both (half the A bytes through L2), unless shareB.
  int cluster = 1;
  /// With cluster 2: the pair takes adjacent m-blocks of one n-block and
  /// shares B instead (each CTA loads half of the B tile's rows, multicast
  /// into both), where both m-blocks multiply the same group's B.
  bool shareB = false;
  /// m_contiguous: walk the tiles in bands of this many n-units (0: no
  /// bands, the whole n range per m-block).
  int rasterBand = 0;
  /// Cap on the persistent grid; 0 means one CTA per SM of the device.
  int64_t numSms = 0;
  /// Per-column B scales (the weight gradient's 1x128 B scales along the
  /// tokens): blockN of them a stage instead of the tile's two.
  bool scalePerColumnB = false;
  /// Contraction elements per promotion (the scale block along K): 128,
  /// or 32 for MXFP8 (1x32 UE8M0 scales on A and B), where each k32 wgmma
  /// step of a K block is promoted on its own with per-row A and
  /// per-column B scales (scalePerColumnB), decoded to f32 in the stage.
  int scaleBlockK = 128;
  /// bf16 D leaves through a shared buffer per consumer warpgroup as
  /// 16-byte row chunks (WgmmaLayout::epilogue*).
  bool stagedEpilogue = false;
  /// Dynamic shared memory bytes of a CTA (WgmmaLayout::totalBytes; 0 for
  /// simt), kept so the runtime launches without recomputing the layout.
  int64_t sharedBytes = 0;

  bool operator==(const KernelConfig &o) const;
  bool operator!=(const KernelConfig &o) const { return !(*this == o); }
};

/// The configuration as one line of `key=value` fields, the form the kernel
/// cache stores: `family=wgmma tile=128x192x128 stages=4 ...`.
QGEMM_API std::string encodeConfig(const KernelConfig &cfg);
/// Parses encodeConfig's text. A field that is missing, unknown or out of
/// range is an error (`*why` says which); a cache entry whose configuration
/// does not decode, or does not match its family's layout
/// (ConfigRules.h: checkConfigConsistent), is never launched.
QGEMM_API std::optional<KernelConfig> decodeConfig(std::string_view text,
                                                   std::string *why = nullptr);

} // namespace qgemm

#endif // QGEMM_KERNELCONFIG_H
