"""Kernel: a compiled qgemm kernel, its queries and its launch."""
import ctypes
import json
import os
from collections import namedtuple
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from . import _capi
from ._capi import lib
from ._errors import ArgumentError
from ._gemm_launch import GemmLaunch, host_groups_array
from ._ints import INT64, integer
from ._dispatch_launch import PermuteLaunch, UnpermuteLaunch
from ._kernel_config import Config, _config_of
from ._op_modules import registered_launcher
from ._quantize_launch import QuantizeLaunch
from ._quantize_launch import adamw_hyper as _adamw_hyper
from ._swiglu_launch import SwigluBackwardLaunch, SwigluQuantizeLaunch
from ._swiglu_launch import swiglu_info as _swiglu_info
from ._runtime import (Handle, HandleOwner, Runtime, _Spec, check,
                       default_runtime)

Scale = namedtuple("Scale", "block dtype layout")


Geometry = namedtuple("Geometry", "grid block cluster shared_bytes")
SwigluInfo = namedtuple(
    "SwigluInfo", "op halves input_dtype output_dtype rowwise columnwise "
    "columnwise_transposed bf16_output intermediate")

#: A device tensor: a torch tensor, or anything with __dlpack__ or
#: __cuda_array_interface__ (core reads them without importing a
#: framework).
_Tensor = Any
#: None (the current stream), an int (CUstream) or a framework's stream
#: object.
_Stream = Any


class Kernel(HandleOwner):
    """A compiled kernel (qgemm_kernel). Properties are its contract and
    configuration; launch() runs it. Get one from qgemm.compile()."""

    def __init__(self, handle: ctypes.c_void_p, runtime: Runtime) -> None:
        box = self._box = Handle(handle.value, lib.qgemm_kernel_destroy)
        self.runtime = runtime
        self._gemm = None
        # Kept for messages about the kernel after close().
        self._name = lib.qgemm_kernel_name(box.value).decode()
        if self.op == "grouped_gemm":
            info = _capi.GemmInfo(ctypes.sizeof(_capi.GemmInfo))
            check(lib.qgemm_kernel_gemm_info(box.value, ctypes.byref(info)))
            self._gemm = info
        self._config = _config_of(box.value)
        # Built on the first launch (_gemm_launch.py).
        self._gemm_launch = None

    def close(self) -> None:
        """Free the kernel now rather than when it is collected (calls in
        flight on other threads finish first: they hold the handle). Any
        later use raises ArgumentError, the cached properties (n, a_scale,
        config, ...) included: never an empty answer or a launch of freed
        memory."""
        # The launch plans hold the handle too: drop them, and mark it
        # closed so that a plan still held by a call refuses its next use.
        self._release()
        self._gemm_launch = None
        self.__dict__.pop("_op_launches", None)

    def __enter__(self) -> "Kernel":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self):
        if self.__dict__.get("_box") is None:
            return "<qgemm.Kernel %s (closed)>" % getattr(self, "_name", "?")
        return "<qgemm.Kernel %s>" % getattr(self, "_name", "?")

    def _closed_message(self):
        return "kernel %s is closed; compile it again" % getattr(
            self, "_name", "?")

    def _str(self, fn):
        box = self._live()  # held until the text is copied out
        return fn(box.value).decode()

    # Identity and text.
    @property
    def name(self) -> str:
        """PTX entry point, qgemm_<spec name>_<hash8>"""
        return self._str(lib.qgemm_kernel_name)

    @property
    def spec_name(self) -> str:
        return self._str(lib.qgemm_kernel_spec_name)

    @property
    def hash(self) -> str:
        """identity: 16 hex digits of the canonical spec"""
        return self._str(lib.qgemm_kernel_hash)

    @property
    def target(self) -> str:
        return self._str(lib.qgemm_kernel_target)

    @property
    def ptx(self) -> str:
        return self._str(lib.qgemm_kernel_ptx)

    @property
    def canonical_json(self) -> str:
        return self._str(lib.qgemm_kernel_canonical_json)

    @property
    def spec(self) -> Dict[str, Any]:
        """the canonical spec as a dict"""
        return json.loads(self.canonical_json)

    @property
    def cache_note(self) -> str:
        return self._str(lib.qgemm_kernel_cache_note)

    @property
    def source(self) -> str:
        """where compile found it: memory, disk or compiled"""
        return _capi.SOURCES[self._int(lib.qgemm_kernel_source_of)]

    @property
    def op(self) -> str:
        return _capi.OPS[self._int(lib.qgemm_kernel_op)]

    def _int(self, fn):
        box = self._live()
        return fn(box.value)

    @property
    def config(self) -> Config:
        """The kernel's configuration (Config: family, tile, stages, ...)."""
        self._live()
        return self._config

    # The grouped_gemm contract (None for other ops). Read once at compile
    # time, but answered only while the kernel is open, like every query.
    def _g(self, field, names=None):
        self._live()
        if self._gemm is None:
            return None
        v = getattr(self._gemm, field)
        return names[v] if names else v

    @property
    def grouping(self) -> Optional[str]:
        return self._g("grouping", _capi.GROUPINGS)

    @property
    def group_index(self) -> Optional[str]:
        return self._g("group_index", _capi.GROUP_INDICES)

    @property
    def alignment(self) -> Optional[int]:
        return self._g("alignment")

    @property
    def n(self) -> Optional[int]:
        return self._g("n")

    @property
    def k(self) -> Optional[int]:
        return self._g("k")

    @property
    def a_dtype(self) -> Optional[str]:
        return self._g("a_dtype", _capi.DTYPES)

    @property
    def b_dtype(self) -> Optional[str]:
        return self._g("b_dtype", _capi.DTYPES)

    @property
    def d_dtype(self) -> Optional[str]:
        return self._g("d_dtype", _capi.DTYPES)

    @property
    def accumulate(self) -> bool:
        return self._g("accumulate") is not None and \
            bool(self._gemm.accumulate)

    @property
    def padding_rows(self) -> Optional[str]:
        return None if self._g("padding_rows_zero") is None \
            else ("zero" if self._gemm.padding_rows_zero else "untouched")

    def _scale(self, which):
        self._live()
        if self._gemm is None:
            return None
        s = getattr(self._gemm, which)
        return Scale((s.block_rows, s.block_cols), _capi.DTYPES[s.dtype],
                     _capi.SCALE_LAYOUTS[s.layout])

    @property
    def a_scale(self) -> Optional[Scale]:
        return self._scale("a_scale")

    @property
    def b_scale(self) -> Optional[Scale]:
        return self._scale("b_scale")

    def launch_geometry(self, rows: int, num_groups: int = 1,
                        sm_count: int = 132) -> Geometry:
        """Grid, block, cluster and shared memory of a launch of `rows` rows
        and `num_groups` groups on a GPU with `sm_count` SMs (132: H100
        SXM). Needs no GPU."""
        g = _capi.LaunchGeometry(ctypes.sizeof(_capi.LaunchGeometry))
        box = self._live()
        check(lib.qgemm_kernel_launch_geometry(
            box.value, integer(rows, "rows", *INT64),
            integer(num_groups, "num_groups", *INT64),
            integer(sm_count, "sm_count", *INT64), ctypes.byref(g)))
        return Geometry(tuple(g.grid), tuple(g.block), g.cluster,
                        g.shared_bytes)

    def load(self) -> None:
        """Load the module into the current CUDA context now."""
        rt, box = self.runtime._live(), self._live()
        check(lib.qgemm_kernel_load(rt.value, box.value))

    # Launch.
    def launch(self, a: _Tensor, scale_a: _Tensor, b: _Tensor,
               scale_b: _Tensor, d: _Tensor, *,
               groups: Optional[_Tensor] = None,
               host_groups: Optional[Iterable[int]] = None,
               c: Optional[_Tensor] = None, stream: _Stream = None,
               error_flag: Optional[_Tensor] = None,
               workspace: Optional[_Tensor] = None,
               debug_sync: bool = False) -> None:
        """Run D = A.B (or C + A.B) on `stream`.

        Tensors are torch tensors or anything with __dlpack__ or
        __cuda_array_interface__, on one CUDA device, dense row-major, in
        the spec's layouts: FP8 data as float8 or uint8, f32 scales as
        float32, UE8M0 scales as float8_e8m0 or uint8, D as the spec's
        bf16/f32, groups as int32. Rows and the group count come from the
        shapes. `host_groups` is a host copy of `groups` (list or array of
        ints), required when the kernel reads group metadata: it is checked
        before the launch (offsets monotonic, multiples of the alignment,
        ...). Every check runs before anything is launched; a failure
        raises qgemm.ArgumentError. The work queued on the tensors'
        current torch stream runs before the launch (as DLPack orders it).

        Device-only metadata (API 1.2): instead of `host_groups`, pass
        `error_flag` (an int32 device tensor of one element, zeroed by the
        caller) and `workspace` (int32 device scratch as large as
        `groups`). A check kernel runs first on the same stream; bad
        metadata sets qgemm.GROUP_ERROR_* bits in error_flag (read it
        whenever convenient: qgemm.group_error_string(word) says what they
        mean) and every group is launched empty. `debug_sync=True` (or
        QGEMM_DEBUG_SYNC=1) synchronizes and raises at once instead.
        """
        plan = self._gemm_launch
        if plan is None:
            self._live()
            if self._gemm is None:
                raise ArgumentError(
                    "%s is a %s kernel; launch() runs grouped_gemm kernels"
                    % (self.name, self.op))
            plan = self._gemm_launch = GemmLaunch(self)
        plan(a, scale_a, b, scale_b, d, groups, host_groups, c, stream,
             error_flag, workspace, debug_sync)


    # The other ops (C API 1.1). One method per op rather than one launch()
    # dispatching on the op: their operands share nothing, so each method
    # names its own, and a kernel of another op is refused by name.
    def _op(self, op, cls):
        plans = self.__dict__.get("_op_launches")
        plan = plans.get(op) if plans else None
        if plan is None:
            self._live()
            plans = self.__dict__.setdefault("_op_launches", {})
            if self.op != op:
                raise ArgumentError("%s is a %s kernel; %s() runs %s kernels"
                                    % (self.name, self.op, op, op))
            plan = plans[op] = cls(self)
        return plan

    def run(self, *, stream: _Stream = None, **arguments: Any) -> Any:
        """Launch a kernel of an op that plugged in its launcher (a module
        of qgemm/core/_ops, _op_modules.py): its tensors by operand name
        and its options, as that op documents. The ops with a method of
        their own (launch, quantize, permute, unpermute, swiglu_quantize,
        swiglu_backward) are launched by it."""
        cls = registered_launcher(self.op)
        if cls is None:
            raise ArgumentError(
                "%s is a %s kernel, launched by Kernel.%s(); run() launches "
                "the ops whose launcher is a module of qgemm.core._ops"
                % (self.name, self.op, "launch" if self.op == "grouped_gemm"
                   else self.op))
        return self._op(self.op, cls)(stream=stream, **arguments)

    def quantize(self, x: _Tensor, *, row_data: Optional[_Tensor] = None,
                 row_scales: Optional[_Tensor] = None,
                 col_data: Optional[_Tensor] = None,
                 col_scales: Optional[_Tensor] = None,
                 group_offsets: Optional[_Tensor] = None,
                 host_group_offsets: Optional[Iterable[int]] = None,
                 stream: _Stream = None,
                 error_flag: Optional[_Tensor] = None,
                 workspace: Optional[_Tensor] = None,
                 debug_sync: bool = False, grad: Optional[_Tensor] = None,
                 exp_avg: Optional[_Tensor] = None,
                 exp_avg_sq: Optional[_Tensor] = None,
                 bias_corrections: Optional[_Tensor] = None,
                 x_scales: Optional[_Tensor] = None,
                 lr: Optional[float] = None,
                 betas: Optional[Tuple[float, float]] = None,
                 weight_decay: Optional[float] = None,
                 eps: Optional[float] = None) -> None:
        """Quantize `x` ((rows, k), or (G, rows, k) for multi_tensor, the
        spec's input dtype) into the outputs the spec declares: row_data
        (rows, k) and row_scales; col_data ((k, rows) when the column-wise
        layout is GEMM_READY, else (rows, k)) and col_scales. FP8 outputs
        may be uint8; scales any shape with at least quantize_sizes()
        elements. `group_offsets` (int32 [groups], cumulative ends) restarts
        the column-wise blocks at each group and needs `host_group_offsets`,
        or (API 1.2) `error_flag` and `workspace` to have the offsets checked
        on the device as Kernel.launch does (size col_scales for
        quantize_sizes(rows, num_groups=G), the bound).

        A spec with `adamw` (API 1.9) is the weights' AdamW step: x is the
        weights, updated in place with exp_avg and exp_avg_sq (the spec's
        state dtype) from `grad` (x's dtype and shape), `bias_corrections`
        (f32 (2,) on the device: 1 - beta1^t and sqrt(1 - beta2^t) of this
        step t) and the hyperparameters lr, betas (beta1, beta2),
        weight_decay and eps of torch.optim.AdamW; the outputs receive the
        updated x quantized.

        A spec whose input is FP8 (API 1.9) takes weights' row-wise
        [128,128] form x (G, rows, k) with its f32 scales `x_scales` and
        writes the column-wise form: col_data (G, k, rows), the same bytes
        transposed, and col_scales.
        """
        plan = self._op("quantize", QuantizeLaunch)
        tensors = {"x": x, "row_data": row_data, "row_scales": row_scales,
                   "col_data": col_data, "col_scales": col_scales,
                   "group_offsets": group_offsets, "error_flag": error_flag,
                   "workspace": workspace, "grad": grad, "exp_avg": exp_avg,
                   "exp_avg_sq": exp_avg_sq,
                   "bias_corrections": bias_corrections,
                   "x_scales": x_scales}
        given = {n: t for n, t in tensors.items() if t is not None}
        hyper = None
        if lr is not None or betas is not None or weight_decay is not None \
                or eps is not None:
            hyper = _adamw_hyper(lr, betas, weight_decay, eps)
        plan(given, host_group_offsets, stream, debug_sync, hyper)

    def quantize_sizes(self, rows: int, cols: int = 0, num_tensors: int = 1,
                       host_group_offsets: Optional[Iterable[int]] = None,
                       num_groups: int = 0) -> Dict[str, int]:
        """Elements of each output of a quantize launch of `rows` rows and
        `cols` columns (0: the spec's shape.k):
        {"row_data", "row_scales", "col_data", "col_scales"} (0 for an
        output the spec does not declare). Needs no GPU. `num_groups`
        without host offsets: the sizes of a device-groups launch (the
        bound on the column-wise scales)."""
        plan = self._op("quantize", QuantizeLaunch)
        host = None if host_group_offsets is None \
            else host_groups_array(host_group_offsets, "host_group_offsets")
        rows = integer(rows, "rows", *INT64)
        cols = integer(cols, "cols", *INT64)
        num_tensors = integer(num_tensors, "num_tensors", *INT64)
        num_groups = integer(num_groups, "num_groups", *INT64)
        sizes = plan.sizes(rows, cols, num_tensors,
                           len(host) if host else num_groups, host)
        return dict(zip(("row_data", "row_scales", "col_data", "col_scales"),
                        sizes))

    def permute(self, *, host_routing: Optional[Iterable[int]] = None,
                stream: _Stream = None, **tensors: _Tensor) -> None:
        """Run a permute kernel. Forward: routing (T, topk) int32, x (T, k)
        [, x_scales] [, probs (T, topk) f32] in; y (R, k) [, y_scales],
        offsets and counts (G,) int32, row_group (R,), row_map (T, topk),
        [row_probs (R,),] error (1,) int32 out, with R at least
        permute_rows(T, G). A fused quantize+permute kernel takes bf16/f32
        x (no x_scales) and writes FP8 y with y_scales. Backward: grad_y
        (R, k) bf16, row_map
        [, grad_row_probs (R,)] in; grad_x (T, k) bf16 [, grad_probs] out.
        `host_routing` (T * topk ints), when given, is checked first."""
        self._op("permute", PermuteLaunch)(tensors, host_routing, stream)

    def permute_rows(self, tokens: int, experts: int) -> int:
        """R, the rows every permuted output needs for `tokens` tokens and
        `experts` groups: tokens * topk + experts * (alignment - 1)."""
        self._op("permute", PermuteLaunch)
        rows = ctypes.c_int64()
        box = self._live()
        check(lib.qgemm_kernel_permute_rows(
            box.value, integer(tokens, "tokens", *INT64),
            integer(experts, "experts", *INT64), ctypes.byref(rows)))
        return rows.value

    def unpermute(self, *, stream: _Stream = None,
                  **tensors: _Tensor) -> None:
        """Run an unpermute kernel. Forward: y (R, k) bf16, row_map
        (T, topk) int32 [, probs (T, topk) f32] in; out (T, k) bf16 out.
        Backward: grad_out (T, k), row_map, row_group (R,) [, probs, y] in;
        grad_y (R, k) bf16 [, grad_probs (T, topk) f32] out."""
        self._op("unpermute", UnpermuteLaunch)(tensors, stream)


    # swiglu_quantize / swiglu_backward (C API 1.3).
    def swiglu_info(self) -> SwigluInfo:
        """The contract of a swiglu_quantize or swiglu_backward kernel:
        SwigluInfo(op, halves ("stacked" / "interleaved"), input_dtype,
        output_dtype, rowwise, columnwise (Scale or None),
        columnwise_transposed, bf16_output, intermediate (shape.i; 0 when
        the spec leaves I to run time)). Needs no GPU."""
        if self.op not in ("swiglu_quantize", "swiglu_backward"):
            raise ArgumentError("%s is a %s kernel; swiglu_info() describes "
                                "swiglu_quantize and swiglu_backward kernels"
                                % (self.name, self.op))
        i = _swiglu_info(self)

        def scale(has, sc):
            return Scale((sc.block_rows, sc.block_cols),
                         _capi.DTYPES[sc.dtype],
                         _capi.SCALE_LAYOUTS[sc.layout]) if has else None
        return SwigluInfo(_capi.OPS[i.op], _capi.SWIGLU_HALVES[i.halves],
                          _capi.DTYPES[i.input_dtype],
                          _capi.DTYPES[i.output_dtype],
                          scale(i.has_rowwise, i.rowwise),
                          scale(i.has_columnwise, i.columnwise),
                          bool(i.columnwise_transposed), bool(i.bf16_output),
                          i.intermediate)

    def swiglu_quantize(self, x: _Tensor, *,
                        row_data: Optional[_Tensor] = None,
                        row_scales: Optional[_Tensor] = None,
                        col_data: Optional[_Tensor] = None,
                        col_scales: Optional[_Tensor] = None,
                        y: Optional[_Tensor] = None,
                        group_offsets: Optional[_Tensor] = None,
                        host_group_offsets: Optional[Iterable[int]] = None,
                        stream: _Stream = None,
                        error_flag: Optional[_Tensor] = None,
                        workspace: Optional[_Tensor] = None,
                        debug_sync: bool = False) -> None:
        """y = silu(gate) * up of x (bf16 (rows, 2I), the spec's halves
        layout), computed in f32 and quantized into the outputs the spec
        declares, exactly as quantize() quantizes an f32 (rows, I) input:
        row_data (rows, I) and row_scales; col_data ((I, rows) when stored
        transposed, else (rows, I)) and col_scales; with bf16_output, `y`
        (rows, I) bf16. Scales any shape with at least swiglu_sizes()
        elements. Token groups (`group_offsets` with `host_group_offsets`,
        or `error_flag` and `workspace` for the device check) as in
        quantize()."""
        plan = self._op("swiglu_quantize", SwigluQuantizeLaunch)
        tensors = {"x": x, "row_data": row_data, "row_scales": row_scales,
                   "col_data": col_data, "col_scales": col_scales, "y": y,
                   "group_offsets": group_offsets, "error_flag": error_flag,
                   "workspace": workspace}
        given = {n: t for n, t in tensors.items() if t is not None}
        plan(given, host_group_offsets, stream, debug_sync)

    def swiglu_sizes(self, rows: int, intermediate: int = 0,
                     host_group_offsets: Optional[Iterable[int]] = None,
                     num_groups: int = 0) -> Dict[str, int]:
        """Elements of each output of a swiglu_quantize launch of `rows`
        rows and `intermediate` columns of y (0: the spec's shape.i):
        {"row_data", "row_scales", "col_data", "col_scales", "y"} (0 for
        an output the spec does not declare). `num_groups` without host
        offsets: a device-groups launch's bound. Needs no GPU."""
        plan = self._op("swiglu_quantize", SwigluQuantizeLaunch)
        host = None if host_group_offsets is None \
            else host_groups_array(host_group_offsets, "host_group_offsets")
        rows = integer(rows, "rows", *INT64)
        intermediate = integer(intermediate, "intermediate", *INT64)
        num_groups = integer(num_groups, "num_groups", *INT64)
        sizes = plan.sizes(rows, intermediate,
                           len(host) if host else num_groups, host)
        return dict(zip(("row_data", "row_scales", "col_data", "col_scales",
                         "y"), sizes))

    def swiglu_backward(self, grad_y: _Tensor, x: _Tensor, grad_x: _Tensor,
                        *, stream: _Stream = None) -> None:
        """grad_x (bf16 (rows, 2I), x's layout) = the gradient of
        silu(gate) * up for grad_y (bf16 (rows, I)) at x (bf16 (rows,
        2I)), in f32 (SwigluContract.h). grad_x may be x itself."""
        self._op("swiglu_backward", SwigluBackwardLaunch)(
            {"grad_y": grad_y, "x": x, "grad_x": grad_x}, stream)


def _compile_parsed(parsed, runtime):
    if runtime is not None and not isinstance(runtime, Runtime):
        raise ArgumentError("runtime must be a qgemm.Runtime or None, not %s"
                            % type(runtime).__name__)
    rt = runtime or default_runtime()
    kernels = []
    for i in range(len(parsed)):
        handle = ctypes.c_void_p()
        # Held for the call: a close() on another thread frees the runtime
        # only once this compile is done.
        box = rt._live()
        status = lib.qgemm_compile(box.value, parsed._handle, i,
                                   ctypes.byref(handle))
        del box
        kernel = Kernel(handle, rt) if handle else None
        # Without a usable GPU the kernel is still there to inspect.
        if status != _capi.OK and not (status == _capi.ERROR_NO_DEVICE
                                       and kernel is not None):
            check(status)
        kernels.append(kernel)
    return kernels


def compile_all(spec: Union[Dict[str, Any], str, os.PathLike],
                runtime: Optional[Runtime] = None) -> List[Kernel]:
    """Every kernel a spec states (a sweep states several), compiled (or
    found in the cache). `spec` is a dict, JSON text or a path."""
    return _compile_parsed(_Spec(spec), runtime)


def compile(spec: Union[Dict[str, Any], str, os.PathLike],
            runtime: Optional[Runtime] = None) -> Kernel:
    """The kernel of a spec that states one (a dict, JSON text or a path).
    Spec errors raise qgemm.SpecError with the file and JSON path. A spec
    with a sweep states several kernels: use compile_all()."""
    parsed = _Spec(spec)
    if len(parsed) != 1:
        raise ArgumentError(
            "the spec states %d kernels (a sweep: %s, ...); use "
            "qgemm.compile_all()" % (len(parsed), parsed.name(0)))
    return _compile_parsed(parsed, runtime)[0]
