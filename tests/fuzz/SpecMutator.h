//===- SpecMutator.h - Seeded mutants of the bundled specs ------*- C++ -*-===//
//
// Mutant i of a run depends only on (seed, i), so any mutant a run reports
// can be made again alone. Mutations are of two kinds: structural ones on
// the parsed document (values of every JSON type and of the spec's own
// vocabulary, deleted and unknown keys, sweeps, deep nesting, values taken
// from another spec, GEMM tuning knobs on any op, sweeps under a null
// parent) and textual ones on its text (bytes flipped, cut, repeated or
// inserted; NUL bytes; duplicate keys; numbers past a double).
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_TESTS_FUZZ_SPECMUTATOR_H
#define QGEMM_TESTS_FUZZ_SPECMUTATOR_H

#include <cstdint>
#include <string>
#include <vector>

namespace qgemm::fuzz {

class SpecMutator {
public:
  /// `seeds`: the texts of valid specs to start from.
  SpecMutator(std::vector<std::string> seeds, uint64_t seed);

  /// Mutant number `index` of this run.
  std::string mutant(uint64_t index) const;

private:
  std::vector<std::string> seeds;
  uint64_t seed;
};

} // namespace qgemm::fuzz

#endif // QGEMM_TESTS_FUZZ_SPECMUTATOR_H
