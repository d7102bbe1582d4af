# lit configuration: lit + FileCheck tests live next to the code they test
# (dialect/test, codegen/test, compiler/test).
import os
import lit.formats
from lit.llvm import llvm_config

config.name = "qgemm"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = config.qgemm_src_root
config.test_exec_root = os.path.join(config.qgemm_obj_root, "lit")
# Only the test folders hold tests; skip sources, specs and build trees.
config.excludes = ["include", "lib", "tools", "tests", "specs", "runtime",
                   "testing", "bench", "docs",
                   "scripts", "cmake", "Inputs", "lit.cfg.py"] + \
    [d for d in os.listdir(config.qgemm_src_root)
     if d.startswith("build") or d.startswith(".")]

# Tests that make device nodes (mknod) need root; they are skipped otherwise.
if hasattr(os, "geteuid") and os.geteuid() == 0:
    config.available_features.add("root")

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.qgemm_tools_dir, append_path=True)
config.environment["QGEMM_CACHE_DIR"] = os.path.join(config.test_exec_root,
                                                     "cache")
config.substitutions.append(("%specs", os.path.join(config.qgemm_src_root,
                                                    "specs")))
config.substitutions.append(("%ptxas", config.ptxas))
