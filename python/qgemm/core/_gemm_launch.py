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
from ._gemm_launch_checks import GemmLaunchChecks
from ._runtime import _flag, check

_READERS = _tensors._READERS
_reader_of = _tensors._reader_of
_read_generic = _tensors._read_generic
_FP8_STAND_IN = "uint8"  # raw bytes stand in for FP8 and UE8M0


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


def raise_closed(plan):
    """A launch plan whose kernel or runtime was closed while it was held
    (by a launch on another thread) refuses every later launch."""
    raise ArgumentError("kernel %s is closed; compile it again" % plan.name
                        if plan.k_box.closed else
                        "the runtime of kernel %s is closed" % plan.name)


def _order(reader, stream, device):
    order = getattr(reader, "order", None)
    if order is not None and device >= 0:
        order(stream, device)


class GemmLaunch(GemmLaunchChecks):
    """Everything static about launching one grouped_gemm kernel."""

    def __init__(self, kernel):
        # The handles (runtime._Handle): held, so that a launch in flight
        # keeps them alive through a close() on another thread, and checked
        # for closed per call; their values as ints for the C calls. The
        # plan keeps no reference to the Kernel, so no cycle delays its
        # release.
        self.name = kernel.name
        self.rt_box = kernel.runtime._live()
        self.k_box = kernel._live()
        self.runtime = self.rt_box.value
        self.handle = self.k_box.value
        self.grouping = kernel.grouping
        self.group_index = kernel.group_index
        self.n, self.k = kernel.n, kernel.k
        self.accumulate = kernel.accumulate
        self.scales = (("scale_a", kernel.a_scale),
                       ("scale_b", kernel.b_scale))

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
        if self.k_box.closed or self.rt_box.closed:
            raise_closed(self)
        if debug_sync is not False and debug_sync is not True:
            debug_sync = _flag(debug_sync, "debug_sync")
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
