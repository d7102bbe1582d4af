"""Kernel: a compiled qgemm kernel, its queries and its launch."""
import array
import ctypes
import json
import threading
from collections import namedtuple

from . import _capi, _tensors
from ._capi import lib
from ._errors import ArgumentError
from ._runtime import _Spec, check, default_runtime

Scale = namedtuple("Scale", "block dtype layout")
Config = namedtuple(
    "Config", "family block_m block_n block_k stages threads cluster "
    "n_fastest raster_band scale_block_k num_sms shared_bytes")
Geometry = namedtuple("Geometry", "grid block cluster shared_bytes")


def _stream_handle(stream):
    """A CUstream value from None, an int, or a framework stream object
    (torch.cuda.Stream.cuda_stream, CuPy's .ptr, __cuda_stream__)."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    for attr in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise ArgumentError("stream must be None, an int (CUstream) or a CUDA "
                        "stream object, not %s" % type(stream).__name__)


class Kernel:
    """A compiled kernel (qgemm_kernel). Properties are its contract and
    configuration; launch() runs it. Get one from qgemm.compile()."""

    def __init__(self, handle, runtime):
        self._handle = handle
        self._destroy = lib.qgemm_kernel_destroy
        self.runtime = runtime
        self._gemm = None
        if self.op == "grouped_gemm":
            info = _capi.GemmInfo(ctypes.sizeof(_capi.GemmInfo))
            check(lib.qgemm_kernel_gemm_info(handle, ctypes.byref(info)))
            self._gemm = info
        cfg = _capi.ConfigInfo(ctypes.sizeof(_capi.ConfigInfo))
        check(lib.qgemm_kernel_config(handle, ctypes.byref(cfg)))
        self.config = Config(
            _capi.FAMILIES[cfg.family], cfg.block_m, cfg.block_n, cfg.block_k,
            cfg.stages, cfg.threads, cfg.cluster, bool(cfg.n_fastest),
            cfg.raster_band, cfg.scale_block_k, cfg.num_sms, cfg.shared_bytes)
        # One argument struct per thread, refilled by each launch: no
        # allocation per call, and threads launching one kernel never share.
        self._tls = threading.local()

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            self._destroy(handle)
            self._handle = None

    def __repr__(self):
        return "<qgemm.Kernel %s>" % self.name

    def _str(self, fn):
        return fn(self._handle).decode()

    # Identity and text.
    name = property(lambda s: s._str(lib.qgemm_kernel_name),
                    doc="PTX entry point, qgemm_<spec name>_<hash8>")
    spec_name = property(lambda s: s._str(lib.qgemm_kernel_spec_name))
    hash = property(lambda s: s._str(lib.qgemm_kernel_hash),
                    doc="identity: 16 hex digits of the canonical spec")
    target = property(lambda s: s._str(lib.qgemm_kernel_target))
    ptx = property(lambda s: s._str(lib.qgemm_kernel_ptx))
    canonical_json = property(lambda s: s._str(lib.qgemm_kernel_canonical_json))
    spec = property(lambda s: json.loads(s.canonical_json),
                    doc="the canonical spec as a dict")
    cache_note = property(lambda s: s._str(lib.qgemm_kernel_cache_note))
    source = property(
        lambda s: _capi.SOURCES[lib.qgemm_kernel_source_of(s._handle)],
        doc="where compile found it: memory, disk or compiled")
    op = property(lambda s: _capi.OPS[lib.qgemm_kernel_op(s._handle)])

    # The grouped_gemm contract (None for other ops).
    def _g(self, field, names=None):
        if self._gemm is None:
            return None
        v = getattr(self._gemm, field)
        return names[v] if names else v

    grouping = property(lambda s: s._g("grouping", _capi.GROUPINGS))
    group_index = property(lambda s: s._g("group_index", _capi.GROUP_INDICES))
    alignment = property(lambda s: s._g("alignment"))
    n = property(lambda s: s._g("n"))
    k = property(lambda s: s._g("k"))
    a_dtype = property(lambda s: s._g("a_dtype", _capi.DTYPES))
    b_dtype = property(lambda s: s._g("b_dtype", _capi.DTYPES))
    d_dtype = property(lambda s: s._g("d_dtype", _capi.DTYPES))
    accumulate = property(lambda s: s._gemm is not None and
                          bool(s._gemm.accumulate))
    padding_rows = property(lambda s: None if s._gemm is None else (
        "zero" if s._gemm.padding_rows_zero else "untouched"))

    def _scale(self, which):
        if self._gemm is None:
            return None
        s = getattr(self._gemm, which)
        return Scale((s.block_rows, s.block_cols), _capi.DTYPES[s.dtype],
                     _capi.SCALE_LAYOUTS[s.layout])

    a_scale = property(lambda s: s._scale("a_scale"))
    b_scale = property(lambda s: s._scale("b_scale"))

    def launch_geometry(self, rows, num_groups=1, sm_count=132):
        """Grid, block, cluster and shared memory of a launch of `rows` rows
        and `num_groups` groups on a GPU with `sm_count` SMs (132: H100
        SXM). Needs no GPU."""
        g = _capi.LaunchGeometry(ctypes.sizeof(_capi.LaunchGeometry))
        check(lib.qgemm_kernel_launch_geometry(
            self._handle, rows, num_groups, sm_count, ctypes.byref(g)))
        return Geometry(tuple(g.grid), tuple(g.block), g.cluster,
                        g.shared_bytes)

    def load(self):
        """Load the module into the current CUDA context now."""
        check(lib.qgemm_kernel_load(self.runtime._handle, self._handle))

    # Launch.
    def _expected_shapes(self, a, b, d):
        """(rows, G, {operand: shape}) from A, B and D's shapes, per
        LAYOUTS.md "Grouping"."""
        n, k, grouping = self.n, self.k, self.grouping
        if grouping == "k_contiguous":
            # A (n, T) and B (k, T), contiguous along the T tokens;
            # D (and C) (G, n, k).
            rows = a.shape[-1] if a.shape else 0
            groups = d.shape[0] if len(d.shape) == 3 else 0
            return rows, groups, {"a": (n, rows), "b": (k, rows),
                                  "d": (groups, n, k)}
        if grouping == "m_masked":
            groups = a.shape[0] if len(a.shape) == 3 else 0
            rows = a.shape[1] if len(a.shape) == 3 else 0
            return rows, groups, {"a": (groups, rows, k),
                                  "b": (groups, n, k),
                                  "d": (groups, rows, n)}
        rows = a.shape[0] if a.shape else 0
        if grouping == "none":
            bshape = (1, n, k) if len(b.shape) == 3 else (n, k)
            return rows, 1, {"a": (rows, k), "b": bshape, "d": (rows, n)}
        groups = b.shape[0] if len(b.shape) == 3 else 0
        return rows, groups, {"a": (rows, k), "b": (groups, n, k),
                              "d": (rows, n)}

    def launch(self, a, scale_a, b, scale_b, d, *, groups=None,
               host_groups=None, c=None, stream=None):
        """Run D = A.B (or C + A.B) on `stream`.

        Tensors are anything with __dlpack__ or __cuda_array_interface__, on
        one CUDA device, dense row-major, in the spec's layouts: FP8 data as
        float8 or uint8, f32 scales as float32, UE8M0 scales as float8_e8m0
        or uint8, D as the spec's bf16/f32, groups as int32. Rows and the
        group count come from the shapes. `host_groups` is a host copy of
        `groups` (list or array of ints), required when the kernel reads
        group metadata: it is checked before the launch (offsets monotonic,
        multiples of the alignment, ...). Every check runs before anything
        is launched; a failure raises qgemm.ArgumentError.
        """
        if self._gemm is None:
            raise ArgumentError("%s is a %s kernel; launch() runs "
                                "grouped_gemm kernels" % (self.name, self.op))
        s = _stream_handle(stream)
        views = {
            "a": _tensors.view(a, "a", s),
            "scale_a": _tensors.view(scale_a, "scale_a", s),
            "b": _tensors.view(b, "b", s),
            "scale_b": _tensors.view(scale_b, "scale_b", s),
            "d": _tensors.view(d, "d", s, writable=True),
        }
        if c is not None:
            views["c"] = _tensors.view(c, "c", s)
        if groups is not None:
            views["groups"] = _tensors.view(groups, "groups", s)
        host = None
        if host_groups is not None:
            host = host_groups if (isinstance(host_groups, array.array) and
                                   host_groups.typecode == "i") \
                else array.array("i", host_groups)
        host_ptr = ctypes.cast((ctypes.c_int32 * len(host)).from_buffer(host),
                               ctypes.POINTER(ctypes.c_int32)) \
            if host else None
        rows, num_groups = self._check(views, host is not None)
        self._check_scales(views, rows, num_groups, host_ptr)

        args = getattr(self._tls, "args", None)
        if args is None:
            args = self._tls.args = _capi.GemmArgs(
                ctypes.sizeof(_capi.GemmArgs))
        args.a, args.scale_a = views["a"].ptr, views["scale_a"].ptr
        args.b, args.scale_b = views["b"].ptr, views["scale_b"].ptr
        args.d = views["d"].ptr
        args.c = views["c"].ptr if "c" in views else 0
        args.groups = views["groups"].ptr if "groups" in views else 0
        args.rows, args.num_groups = rows, num_groups
        args.host_groups = host_ptr
        args.host_groups_count = len(host) if host is not None else 0
        check(lib.qgemm_launch_gemm(self.runtime._handle, self._handle,
                                    ctypes.byref(args), s or None))

    def _check_scales(self, views, rows, num_groups, host_ptr):
        """Scale tensors hold at least what the kernel reads (the library
        sizes each layout, LAYOUTS.md)."""
        if self.grouping == "k_contiguous" and host_ptr is None:
            return  # the launch refuses the missing host offsets itself
        need_a, need_b = ctypes.c_int64(), ctypes.c_int64()
        check(lib.qgemm_kernel_scale_elements(
            self._handle, rows, num_groups, host_ptr, ctypes.byref(need_a),
            ctypes.byref(need_b)))
        for name, need, scale in (("scale_a", need_a.value, self.a_scale),
                                  ("scale_b", need_b.value, self.b_scale)):
            v = views[name]
            have = 1
            for size in v.shape:
                have *= size
            if have < need:
                raise ArgumentError(
                    "%s has %d elements (shape %s); %s reads %d for these "
                    "sizes (%s %s scales, blocks %s)"
                    % (name, have, tuple(v.shape), self.name, need,
                       scale.layout, scale.dtype, list(scale.block)))

    def _check(self, views, have_host_groups):
        """dtype, shape, device and layout checks of the views; returns
        (rows, num_groups)."""
        for v in views.values():
            if v.device_type not in (_tensors.DL_CUDA,
                                     _tensors.DL_CUDA_MANAGED):
                raise _tensors._not_cuda(v.name, v.device_type)
        ids = {v.device_id for v in views.values() if v.device_id >= 0}
        if len(ids) > 1:
            raise ArgumentError(
                "the tensors are on different CUDA devices (%s); a launch "
                "runs on one" % ", ".join(
                    "%s on cuda:%d" % (v.name, v.device_id)
                    for v in views.values() if v.device_id >= 0))
        for v in views.values():
            if not _tensors.is_contiguous(v):
                raise ArgumentError(
                    "%s with shape %s has strides %s: qgemm reads dense "
                    "row-major tensors (call .contiguous())"
                    % (v.name, v.shape, v.strides))

        def want(name, dtypes):
            v = views[name]
            if v.dtype not in dtypes:
                raise ArgumentError("%s has dtype %s; the kernel %s expects %s"
                                    % (name, v.dtype, self.name,
                                       " or ".join(dtypes)))

        fp8 = lambda t: (t, "uint8")  # raw bytes stand in for FP8
        want("a", fp8(self.a_dtype))
        want("b", fp8(self.b_dtype))
        for name, scale in (("scale_a", self.a_scale),
                            ("scale_b", self.b_scale)):
            want(name, ("f32",) if scale.dtype == "f32" else fp8("ue8m0"))
        want("d", (self.d_dtype,))

        rows, num_groups, shapes = self._expected_shapes(
            views["a"], views["b"], views["d"])
        if self.accumulate:
            if "c" not in views:
                raise ArgumentError("c is missing: %s accumulates D = C + A.B"
                                    % self.name)
            want("c", ("f32",))
            shapes["c"] = shapes["d"]
        elif "c" in views:
            raise ArgumentError("c is given but %s does not accumulate (add "
                                "\"c\": {\"dtype\": \"f32\"} to the spec)"
                                % self.name)
        index = self.group_index
        if index != "none":
            if "groups" not in views:
                raise ArgumentError("groups is missing: %s reads %s (int32 "
                                    "on the device)" % (self.name, index))
            want("groups", ("int32",))
            shapes["groups"] = (rows,) if index == "row_group" \
                else (num_groups,)
            if not have_host_groups:
                raise ArgumentError(
                    "host_groups is missing: a host copy of %s is checked "
                    "before the launch (a kernel cannot report bad group "
                    "metadata)" % index)
        for name, shape in shapes.items():
            got = views[name].shape
            if tuple(got) != tuple(shape):
                raise ArgumentError(
                    "%s has shape %s; expected %s for %s (%s, n = %d, k = %d)"
                    % (name, tuple(got), tuple(shape), self.name,
                       self.grouping, self.n, self.k))
        return rows, num_groups


def _compile_parsed(parsed, runtime):
    rt = runtime or default_runtime()
    kernels = []
    for i in range(len(parsed)):
        handle = ctypes.c_void_p()
        status = lib.qgemm_compile(rt._handle, parsed._handle, i,
                                   ctypes.byref(handle))
        kernel = Kernel(handle, rt) if handle else None
        # Without a usable GPU the kernel is still there to inspect.
        if status != _capi.OK and not (status == _capi.ERROR_NO_DEVICE
                                       and kernel is not None):
            check(status)
        kernels.append(kernel)
    return kernels


def compile_all(spec, runtime=None):
    """Every kernel a spec states (a sweep states several), compiled (or
    found in the cache). `spec` is a dict, JSON text or a path."""
    return _compile_parsed(_Spec(spec), runtime)


def compile(spec, runtime=None):
    """The kernel of a spec that states one (a dict, JSON text or a path).
    Spec errors raise qgemm.SpecError with the file and JSON path. A spec
    with a sweep states several kernels: use compile_all()."""
    parsed = _Spec(spec)
    if len(parsed) != 1:
        raise ArgumentError(
            "the spec states %d kernels (a sweep: %s, ...); use "
            "qgemm.compile_all()" % (len(parsed), parsed.name(0)))
    return _compile_parsed(parsed, runtime)[0]
