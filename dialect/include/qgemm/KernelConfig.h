//===- KernelConfig.h - How one grouped GEMM kernel is built ------*- C++ -*-===//
//
// The configuration of a kernel: its family, tile, stage count, walk order,
// cluster and grid cap. Its fields are defined once, in
// KernelConfigFields.def, which also generates the table (ConfigField.h)
// that the text form, the #qgemm.config attribute, the C API and Python
// read. It is resolved once, from the contract and the spec's tuning
// request (the family's GemmFamily object, kernels/), by the
// qgemm-resolve-config pass, which stores it on the op as a typed
// attribute; the lowering reads that attribute, the compiler returns it,
// the kernel cache stores it, and the runtime launches from the stored
// value. Nothing derives it a second time.
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

/// The kernel families a grouped GEMM lowers to, one per line of
/// KernelFamilies.def; what each builds is its GemmFamily object
/// (kernels/, GemmFamily.h).
enum class KernelFamily {
#define QGEMM_KERNEL_FAMILY(E, spelling) E,
#include "qgemm/KernelFamilies.def"
};

template <> struct EnumSpellings<KernelFamily> {
  static constexpr const char *what = "kernel family";
  static constexpr std::pair<KernelFamily, std::string_view> spellings[] = {
#define QGEMM_KERNEL_FAMILY(E, spelling) {KernelFamily::E, spelling},
#include "qgemm/KernelFamilies.def"
  };
};
inline std::string_view toString(KernelFamily f) { return spellingOf(f); }

/// Threads per block of the SIMT kernel, one thread per output column: the
/// configuration's default (KernelConfigFields.def).
constexpr int kSimtBlockThreads = 128;

/// One member per line of KernelConfigFields.def (where each is
/// described), with its default.
struct KernelConfig {
#define QGEMM_CONFIG_FIELD(Type, member, name, key, dflt, codec, presence)    \
  Type member = dflt;
#include "qgemm/KernelConfigFields.def"

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
