"""The launch of a grouped_gemm kernel from Python: a plan built once per
kernel, then per call only the tensors are read and checked.

Why a plan: every property of a Kernel (grouping, n, k, dtypes, scale
blocks, name) is a C call, and a launch used to ask for each of them,
several times, per call; the expected dtypes, the shape rule of the
grouping and the scale element counts depend only on the kernel (and on
rows / G), so they are computed once. Per call: one reader per tensor
(_tensors.read), comparisons, and one foreign call, qgemm_launch_gemm.
Every check raises the ArgumentError it always raised, before anything
runs.
"""
import array
import ctypes
import math
import struct
import threading

from . import _capi, _ints, _tensors
from ._capi import lib
from ._errors import ArgumentError
from ._runtime import check

_READERS = _tensors._READERS
_reader_of = _tensors._reader_of
_read_generic = _tensors._read_generic
_FP8_STAND_IN = "uint8"  # raw bytes stand in for FP8 and UE8M0
_SCALE_CACHE_LIMIT = 256  # distinct (rows, G) kept per kernel


def stream_handle(stream):
    """A CUstream value from None, an int, or a framework stream object
    (torch.cuda.Stream.cuda_stream, CuPy's .ptr, __cuda_stream__)."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    # torch's .cuda_stream is a C getter; its __cuda_stream__ is a Python
    # method around it, so the attribute goes first (a launch's hot path).
    handle = getattr(stream, "cuda_stream", None)
    if handle is not None:
        return int(handle)
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    for attr in ("ptr", "handle"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise ArgumentError("stream must be None, an int (CUstream) or a CUDA "
                        "stream object, not %s" % type(stream).__name__)


def host_groups_array(host_groups, name="host_groups"):
    """An int32 array.array of the host group metadata (no copy when it
    already is one): its buffer is what qgemm_gemm_args.host_groups points
    to during the call. An element that is not an int32 raises
    ArgumentError naming it (`name[i]`)."""
    if isinstance(host_groups, array.array) and host_groups.typecode == "i":
        return host_groups
    try:
        return array.array("i", host_groups)
    except (TypeError, OverflowError, ValueError):
        # The slow path says which element it was.
        return array.array("i", _ints.int32_list(host_groups, name))


# qgemm_gemm_args as one struct.pack_into call instead of fourteen ctypes
# field assignments: struct_size, a, scale_a, b, scale_b, d, c, groups
# (uint64), rows, num_groups (int64), host_groups (pointer), count (int64),
# and from API 1.2 flags (uint32, then 4 bytes of padding), error_flag and
# workspace (uint64). The CPU test checks it against the ctypes struct,
# which AbiTest checks against qgemm.h.
GEMM_ARGS_FORMAT = struct.Struct("=QQQQQQQQqqQqI4xQQ")
LAUNCH_DEVICE_GROUPS = 1
LAUNCH_DEBUG_SYNC = 2


def _order(reader, stream, device):
    order = getattr(reader, "order", None)
    if order is not None and device >= 0:
        order(stream, device)


class GemmLaunch:
    """Everything static about launching one grouped_gemm kernel."""

    def __init__(self, kernel):
        # Handles as ints (the Kernel owns them and calls this plan; the plan
        # keeps no reference to the Kernel, so no cycle delays its release).
        self.name = kernel.name
        self.runtime = kernel.runtime._live().value
        self.handle = kernel._live().value
        self.grouping = kernel.grouping
        self.group_index = kernel.group_index
        self.n, self.k = kernel.n, kernel.k
        self.accumulate = kernel.accumulate
        self.scales = (("scale_a", kernel.a_scale), ("scale_b", kernel.b_scale))

        def fp8(t):
            return (t, _FP8_STAND_IN)

        def scale_dtypes(scale):
            return ("f32",) if scale.dtype == "f32" else fp8("ue8m0")
        # (operand, accepted dtype names) in the order they are checked.
        self.dtypes = {
            "a": fp8(kernel.a_dtype), "b": fp8(kernel.b_dtype),
            "scale_a": scale_dtypes(kernel.a_scale),
            "scale_b": scale_dtypes(kernel.b_scale),
            "d": (kernel.d_dtype,)}
        # c and groups are only dtype-checked where the kernel reads them;
        # elsewhere their presence is the error (_check_shapes).
        if self.accumulate:
            self.dtypes["c"] = ("f32",)
        if self.group_index != "none":
            self.dtypes["groups"] = ("int32",)
        self.fast_dtypes = tuple(
            frozenset(self.dtypes.get(name, ())) for name in
            ("a", "scale_a", "b", "scale_b", "d", "c", "groups"))
        self.fast_shapes = getattr(self, "_shapes_" + self.grouping)
        self.groups_per_row = self.group_index == "row_group"
        # k_contiguous kernels may size their scales from the host offsets,
        # so only the other groupings cache by (rows, G).
        self.scale_cache = {} if self.grouping != "k_contiguous" else None
        self.launch_fn = lib.qgemm_launch_gemm
        self.args_size = ctypes.sizeof(_capi.GemmArgs)
        if GEMM_ARGS_FORMAT.size != self.args_size:
            raise ImportError("qgemm: GEMM_ARGS_FORMAT is %d bytes, "
                              "qgemm_gemm_args %d" % (GEMM_ARGS_FORMAT.size,
                                                      self.args_size))
        self.tls = threading.local()

    # (rows, G) when A, B and D have the grouping's shapes, else None; the
    # explaining checks (_check_shapes) say what is wrong.
    def _shapes_m_contiguous(self, sa, sb, sd):
        if len(sa) != 2 or len(sb) != 3:
            return None
        rows, groups = sa[0], sb[0]
        n, k = self.n, self.k
        if sa[1] == k and sb[1] == n and sb[2] == k and \
                tuple(sd) == (rows, n):
            return rows, groups
        return None

    def _shapes_m_masked(self, sa, sb, sd):
        if len(sa) != 3:
            return None
        groups, rows = sa[0], sa[1]
        n, k = self.n, self.k
        if sa[2] == k and tuple(sb) == (groups, n, k) and \
                tuple(sd) == (groups, rows, n):
            return rows, groups
        return None

    def _shapes_k_contiguous(self, sa, sb, sd):
        if len(sa) != 2 or len(sd) != 3:
            return None
        rows, groups = sa[1], sd[0]
        n, k = self.n, self.k
        if sa[0] == n and tuple(sb) == (k, rows) and sd[1] == n and \
                sd[2] == k:
            return rows, groups
        return None

    def _shapes_none(self, sa, sb, sd):
        if len(sa) != 2:
            return None
        rows = sa[0]
        n, k = self.n, self.k
        if sa[1] == k and tuple(sd) == (rows, n) and \
                tuple(sb) in ((n, k), (1, n, k)):
            return rows, 1
        return None

    # -- per call ----------------------------------------------------------
    def __call__(self, a, scale_a, b, scale_b, d, groups, host_groups, c,
                 stream, error_flag=None, workspace=None, debug_sync=False):
        s = stream_handle(stream)
        device_groups = error_flag is not None
        # _tensors.read(), inlined: this is the per-tensor cost.
        reader = _READERS.get
        fa = reader(type(a)) or _reader_of(a)
        ra = fa(a, "a", s, False)
        fsa = reader(type(scale_a)) or _reader_of(scale_a)
        rsa = fsa(scale_a, "scale_a", s, False)
        fb = reader(type(b)) or _reader_of(b)
        rb = fb(b, "b", s, False)
        fsb = reader(type(scale_b)) or _reader_of(scale_b)
        rsb = fsb(scale_b, "scale_b", s, False)
        fd = reader(type(d)) or _reader_of(d)
        rd = fd(d, "d", s, True)
        fc = rc = fg = rg = None
        if c is not None:
            fc = reader(type(c)) or _reader_of(c)
            rc = fc(c, "c", s, False)
        if groups is not None:
            fg = reader(type(groups)) or _reader_of(groups)
            rg = fg(groups, "groups", s, False)
        host = None if host_groups is None \
            else host_groups_array(host_groups)
        host_ptr = host.buffer_info()[0] if host else 0
        flags = rerr = rws = 0
        if device_groups:
            rerr, rws = self._device_groups(error_flag, workspace, rg,
                                            host_groups, s)
            flags = LAUNCH_DEVICE_GROUPS | (LAUNCH_DEBUG_SYNC if debug_sync
                                            else 0)

        # The common case in a few comparisons; anything off goes through
        # the checks that name it (same order, same messages as always).
        da, dsa, db, dsb, dd, dc, dg = self.fast_dtypes
        dev = ra[3]
        sizes = self.fast_shapes(ra[1], rb[1], rd[1])
        if sizes is None or not (
                ra[2] in da and rsa[2] in dsa and rb[2] in db and
                rsb[2] in dsb and rd[2] in dd and
                ra[4] and rsa[4] and rb[4] and rsb[4] and rd[4] and
                rsa[3] == dev and rb[3] == dev and rsb[3] == dev and
                rd[3] == dev and
                (rc is None if not dc else
                 (rc is not None and rc[2] in dc and rc[4] and
                  rc[3] == dev and rc[1] == rd[1])) and
                (not dg or (rg is not None and
                            (host is not None or device_groups) and
                            rg[2] in dg and rg[4] and rg[3] == dev and
                            len(rg[1]) == 1 and rg[1][0] == (
                                sizes[0] if self.groups_per_row
                                else sizes[1])))):
            sizes = self._explain(a, scale_a, b, scale_b, d, c, groups,
                                  ra, rsa, rb, rsb, rd, rc, rg,
                                  host is not None or device_groups, s)
        rows, num_groups = sizes
        self._check_scales(rsa[1], rsb[1], rows, num_groups, host_ptr)
        # Readers that order the launch stream after their framework's
        # stream (torch) do it once per launch, after every check passed.
        if fa is fsa is fb is fsb is fd and fc in (None, fa) and \
                fg in (None, fa):
            if fa is not _read_generic:
                _order(fa, s, dev)
        else:  # tensors of several frameworks: each orders its own
            device = max(r[3] for r in (ra, rsa, rb, rsb, rd, rc, rg)
                         if r is not None)
            done = []
            for f in (fa, fsa, fb, fsb, fd, fc, fg):
                if f is not None and f is not _read_generic and \
                        f not in done:
                    done.append(f)
                    _order(f, s, device)

        state = getattr(self.tls, "state", None)
        if state is None:
            buf = bytearray(self.args_size)
            state = self.tls.state = (
                buf, ctypes.byref(_capi.GemmArgs.from_buffer(buf)))
        GEMM_ARGS_FORMAT.pack_into(
            state[0], 0, self.args_size, ra[0], rsa[0], rb[0], rsb[0],
            rd[0], 0 if rc is None else rc[0], 0 if rg is None else rg[0],
            rows, num_groups, host_ptr, 0 if host is None else len(host),
            flags, rerr, rws)
        status = self.launch_fn(self.runtime, self.handle, state[1], s)
        if status:
            check(status)

    def args(self):
        """This thread's qgemm_gemm_args as the last launch filled it (for
        the benchmarks and tests)."""
        return _capi.GemmArgs.from_buffer(self.tls.state[0])

    def _device_groups(self, error_flag, workspace, rg, host_groups, s):
        """The error word and the workspace of a device-groups launch (API
        1.2): int32 tensors on the groups' device, the workspace as large
        as groups. Returns their addresses."""
        if host_groups is not None:
            raise ArgumentError(
                "host_groups and error_flag are both given: error_flag asks "
                "for the device check of the group metadata, host_groups for "
                "the host check; pass one")
        if workspace is None:
            raise ArgumentError(
                "workspace is missing: a launch with error_flag needs int32 "
                "device scratch as large as groups for the checked copy")
        re = _tensors.read(error_flag, "error_flag", s)
        rw = _tensors.read(workspace, "workspace", s)
        for name, r in (("error_flag", re), ("workspace", rw)):
            if r[2] != "int32":
                raise ArgumentError("%s has dtype %s; expected int32"
                                    % (name, r[2]))
            if rg is not None and r[3] != rg[3]:
                raise ArgumentError("%s is on cuda:%d but groups on cuda:%d"
                                    % (name, r[3], rg[3]))
            if not r[4]:
                raise ArgumentError("%s is not dense" % name)
        if math.prod(re[1]) < 1:
            raise ArgumentError("error_flag has no element; it is one int32")
        if rg is not None and math.prod(rw[1]) < math.prod(rg[1]):
            raise ArgumentError(
                "workspace has %d elements; groups has %d and the checked "
                "copy needs as many" % (math.prod(rw[1]), math.prod(rg[1])))
        return re[0], rw[0]

    def _explain(self, a, scale_a, b, scale_b, d, c, groups, ra, rsa, rb,
                 rsb, rd, rc, rg, have_groups, s):
        """The checks one by one, raising the first failure with its
        message; returns (rows, G) when the launch is fine after all (e.g.
        tensors from the CUDA array interface, which has no device id)."""
        ops = [("a", a, ra), ("scale_a", scale_a, rsa), ("b", b, rb),
               ("scale_b", scale_b, rsb), ("d", d, rd)]
        if rc is not None:
            ops.append(("c", c, rc))
        if rg is not None:
            ops.append(("groups", groups, rg))
        self._check_tensors(ops, s)
        got = {name: r for name, _, r in ops}
        return self._check_shapes(got, have_groups)

    def _check_tensors(self, ops, s):
        """One device, dense, the kernel's dtypes."""
        device = -1
        for _, _, r in ops:
            if r[3] >= 0:
                if device < 0:
                    device = r[3]
                elif r[3] != device:
                    raise ArgumentError(
                        "the tensors are on different CUDA devices (%s); a "
                        "launch runs on one" % ", ".join(
                            "%s on cuda:%d" % (name, r[3])
                            for name, _, r in ops if r[3] >= 0))
        for name, obj, r in ops:
            if not r[4]:
                raise ArgumentError(
                    "%s with shape %s has strides %s: qgemm reads dense "
                    "row-major tensors (call .contiguous())"
                    % (name, tuple(r[1]), _tensors.strides_of(obj, name, s)))
        dtypes = self.dtypes
        for name, _, r in ops:
            if name in dtypes and r[2] not in dtypes[name]:
                raise ArgumentError(
                    "%s has dtype %s; the kernel %s expects %s"
                    % (name, r[2], self.name, " or ".join(dtypes[name])))

    def _expected_shapes(self, a, b, d):
        """(rows, G, {operand: shape}) from A, B and D's shapes, per
        LAYOUTS.md "Grouping"."""
        n, k, grouping = self.n, self.k, self.grouping
        if grouping == "m_contiguous":
            rows = a[0] if a else 0
            groups = b[0] if len(b) == 3 else 0
            return rows, groups, {"a": (rows, k), "b": (groups, n, k),
                                  "d": (rows, n)}
        if grouping == "k_contiguous":
            # A (n, T) and B (k, T), contiguous along the T tokens;
            # D (and C) (G, n, k).
            rows = a[-1] if a else 0
            groups = d[0] if len(d) == 3 else 0
            return rows, groups, {"a": (n, rows), "b": (k, rows),
                                  "d": (groups, n, k)}
        if grouping == "m_masked":
            groups = a[0] if len(a) == 3 else 0
            rows = a[1] if len(a) == 3 else 0
            return rows, groups, {"a": (groups, rows, k),
                                  "b": (groups, n, k),
                                  "d": (groups, rows, n)}
        rows = a[0] if a else 0
        bshape = (1, n, k) if len(b) == 3 else (n, k)
        return rows, 1, {"a": (rows, k), "b": bshape, "d": (rows, n)}

    # Dimensions of a, b and d per grouping, in words for the messages.
    _RANKS = {
        "m_contiguous": {"a": (2, "(rows, k)"), "b": (3, "(G, n, k)"),
                         "d": (2, "(rows, n)")},
        "m_masked": {"a": (3, "(G, M_max, k)"), "b": (3, "(G, n, k)"),
                     "d": (3, "(G, M_max, n)")},
        "k_contiguous": {"a": (2, "(n, tokens)"), "b": (2, "(k, tokens)"),
                         "d": (3, "(G, n, k)")},
        "none": {"a": (2, "(rows, k)"), "b": ((2, 3), "(n, k) or (1, n, k)"),
                 "d": (2, "(rows, n)")},
    }

    def _check_ranks(self, got):
        """Negative sizes and wrong numbers of dimensions, named on the
        operand that has them: rows and G are read from a, b and d, so a
        wrong one there would otherwise be blamed on another operand."""
        for name, r in got.items():
            if any(size < 0 for size in r[1]):
                raise ArgumentError("%s has shape %s, with a negative size"
                                    % (name, tuple(r[1])))
        for name, (rank, words) in self._RANKS[self.grouping].items():
            have = len(got[name][1])
            if have not in (rank if isinstance(rank, tuple) else (rank,)):
                raise ArgumentError(
                    "%s has %d dimension(s) (shape %s); %s expects %s for "
                    "%s" % (name, have, tuple(got[name][1]), self.name,
                            words, self.grouping))

    def _check_shapes(self, got, have_host_groups):
        self._check_ranks(got)
        rows, num_groups, shapes = self._expected_shapes(
            got["a"][1], got["b"][1], got["d"][1])
        if self.accumulate:
            if "c" not in got:
                raise ArgumentError("c is missing: %s accumulates D = C + A.B"
                                    % self.name)
            shapes["c"] = shapes["d"]
        elif "c" in got:
            raise ArgumentError("c is given but %s does not accumulate (add "
                                "\"c\": {\"dtype\": \"f32\"} to the spec)"
                                % self.name)
        index = self.group_index
        if index != "none":
            if "groups" not in got:
                raise ArgumentError("groups is missing: %s reads %s (int32 "
                                    "on the device)" % (self.name, index))
            shapes["groups"] = (rows,) if index == "row_group" \
                else (num_groups,)
            if not have_host_groups:
                raise ArgumentError(
                    "host_groups is missing: a host copy of %s is checked "
                    "before the launch; or pass error_flag and workspace "
                    "to have it checked on the device" % index)
        for name, shape in shapes.items():
            have = tuple(got[name][1])
            if have != shape:
                raise ArgumentError(
                    "%s has shape %s; expected %s for %s (%s, n = %d, k = %d)"
                    % (name, have, shape, self.name, self.grouping, self.n,
                       self.k))
        return rows, num_groups

    def scale_elements(self, rows, num_groups, host_ptr):
        """(scale_a, scale_b) elements a launch reads; cached per (rows, G)
        where the host offsets do not matter."""
        cache = self.scale_cache
        if cache is not None:
            need = cache.get((rows, num_groups))
            if need is not None:
                return need
        need_a, need_b = ctypes.c_int64(), ctypes.c_int64()
        check(lib.qgemm_kernel_scale_elements(
            self.handle, rows, num_groups, host_ptr or None,
            ctypes.byref(need_a), ctypes.byref(need_b)))
        need = (need_a.value, need_b.value)
        if cache is not None:
            if len(cache) >= _SCALE_CACHE_LIMIT:
                cache.clear()
            cache[(rows, num_groups)] = need
        return need

    def _check_scales(self, shape_a, shape_b, rows, num_groups, host_ptr):
        """Scale tensors hold at least what the kernel reads (the library
        sizes each layout, LAYOUTS.md)."""
        if self.grouping == "k_contiguous" and not host_ptr:
            return  # the launch refuses the missing host offsets itself
        need = self.scale_elements(rows, num_groups, host_ptr)
        if math.prod(shape_a) >= need[0] and math.prod(shape_b) >= need[1]:
            return
        for (name, scale), want, shape in zip(self.scales, need,
                                              (shape_a, shape_b)):
            have = math.prod(shape)
            if have < want:
                raise ArgumentError(
                    "%s has %d elements (shape %s); %s reads %d for these "
                    "sizes (%s %s scales, blocks %s)"
                    % (name, have, tuple(shape), self.name, want,
                       scale.layout, scale.dtype, list(scale.block)))
