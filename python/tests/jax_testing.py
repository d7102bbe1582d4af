"""What the CPU tests of qgemm.jax share: jax itself, or a skip where the
ctest run is the plain `python` one (QGEMM_NO_JAX=1, the system Python
without jax; ctest's python-jax test runs these files with jax), the
dtypes they name, and a shape struct for tracing."""
import os
import unittest

try:
    import jax
    import jax.numpy as jnp
except ImportError:
    if os.environ.get("QGEMM_NO_JAX") == "1":
        raise unittest.SkipTest("jax tests run in ctest's python-jax test")
    raise

BF16, F32, I32 = jnp.bfloat16, jnp.float32, jnp.int32


def s(shape, dtype=BF16):
    """jax.ShapeDtypeStruct(shape, dtype): an argument for tracing."""
    return jax.ShapeDtypeStruct(shape, dtype)
