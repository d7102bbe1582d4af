"""A PEP 517 build backend that copies files into a wheel: the qgemm
package's Python modules plus libqgemm.so from a qgemm build.

Why not setuptools: the package has no extension to compile (the binding is
ctypes over the C API), and a backend with no requirements of its own makes
`pip install python/` work offline with any pip, in or out of build
isolation. libqgemm.so comes from $QGEMM_LIBRARY, else ../build/lib of this
checkout (scripts/dev.sh build puts it there).
"""
import base64
import hashlib
import os
import sysconfig
import zipfile

NAME = "qgemm"
VERSION = "0.1.0"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METADATA = """Metadata-Version: 2.1
Name: qgemm
Version: {version}
Summary: Declared FP8 grouped-GEMM kernels for Hopper (ctypes over libqgemm.so's C API)
Requires-Python: >=3.8
"""


def _library():
    path = os.environ.get("QGEMM_LIBRARY") or os.path.join(
        HERE, "..", "build", "lib", "libqgemm.so")
    if not os.path.isfile(path):
        raise RuntimeError(
            "qgemm: libqgemm.so not found at %s: build qgemm first "
            "(bash scripts/dev.sh build) or set QGEMM_LIBRARY" % path)
    return path


def _files():
    """(path in the wheel, path on disk) of everything the wheel holds: the
    package's modules with its subpackages (qgemm.core, qgemm.torch,
    qgemm.torch.ep, qgemm.jax), py.typed (PEP 561: type checkers read the
    package's hints), libqgemm.so at its top."""
    pkg = os.path.join(HERE, NAME)
    for root, dirs, names in os.walk(pkg):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        rel = os.path.relpath(root, pkg)
        prefix = NAME + "/" + ("" if rel == "." else
                               rel.replace(os.sep, "/") + "/")
        for name in sorted(names):
            if name.endswith(".py") or name == "py.typed":
                yield prefix + name, os.path.join(root, name)
    yield NAME + "/libqgemm.so", _library()
    # The shipped tuning databases, found next to libqgemm.so (TUNING.md).
    tuning = os.path.join(HERE, "..", "tuning")
    if os.path.isdir(tuning):
        for name in sorted(os.listdir(tuning)):
            if name.endswith(".json"):
                yield NAME + "/tuning/" + name, os.path.join(tuning, name)


def _tag():
    # Pure Python code, but libqgemm.so is a Linux x86-64 binary.
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "py3-none-" + platform


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
    return "%s,sha256=%s,%d" % (path, digest.rstrip(b"=").decode(), len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def _wheel_file(tag):
    return ("Wheel-Version: 1.0\nGenerator: qgemm_backend\n"
            "Root-Is-Purelib: false\nTag: %s\n" % tag)


def prepare_metadata_for_build_wheel(metadata_directory,
                                     config_settings=None):
    # Without this hook pip would build (and copy libqgemm.so into) a whole
    # wheel just to read its metadata.
    dist_info = "%s-%s.dist-info" % (NAME, VERSION)
    path = os.path.join(metadata_directory, dist_info)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "METADATA"), "w") as f:
        f.write(METADATA.format(version=VERSION))
    with open(os.path.join(path, "WHEEL"), "w") as f:
        f.write(_wheel_file(_tag()))
    return dist_info


def build_wheel(wheel_directory, config_settings=None,
                metadata_directory=None):
    tag = _tag()
    dist_info = "%s-%s.dist-info" % (NAME, VERSION)
    wheel_name = "%s-%s-%s.whl" % (NAME, VERSION, tag)
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w",
                         zipfile.ZIP_DEFLATED) as whl:
        def add(path, data):
            info = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if path.endswith(".so")
                                  else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
            records.append(_record_line(path, data))

        for path, disk in _files():
            with open(disk, "rb") as f:
                add(path, f.read())
        add(dist_info + "/METADATA",
            METADATA.format(version=VERSION).encode())
        add(dist_info + "/WHEEL",
            _wheel_file(tag).encode())
        record = dist_info + "/RECORD"
        records.append(record + ",,")
        whl.writestr(record, "\n".join(records) + "\n")
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    raise RuntimeError("qgemm: no sdist; install from the checkout "
                       "(pip install python/) after building libqgemm.so")
