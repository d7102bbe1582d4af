"""examples/jax/<name>.py as a module, for the JAX GPU tests (the examples
are not a package)."""
import importlib.util
import os


def load_example(name):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                        "..", "..", "examples", "jax", name + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
