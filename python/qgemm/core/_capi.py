"""ctypes declarations of qgemm.h, the C API of libqgemm.so.

This is the only module that knows the C ABI: the structs mirror qgemm.h
field for field, and every function gets its argtypes/restype once, at
load. The ops' args structs and launches (qgemm_launch_<op>) are not
restated here: they are built from the library's own op table (API 1.6,
OP_ARGS), and each op's operands (field, public name, writes, XLA place)
are read from its operand table (API 1.10, OP_OPERANDS), so a new op
needs nothing in this module. Binding choice
(docs/PYTHON.md): ctypes over the stable C API, so the package needs no
compiler and no Python-version-specific build.
"""
import ctypes
import os
from collections import namedtuple
from ctypes import (POINTER, Structure, c_char_p, c_int, c_int32, c_int64,
                    c_size_t, c_uint32, c_uint64, c_void_p)

# The header this module mirrors (QGEMM_API_VERSION of qgemm.h).
API_VERSION = 1010

OK = 0
ERROR_USER = 1
ERROR_INTERNAL = 2
ERROR_SPEC = 3
ERROR_INVALID_ARGUMENT = 4
ERROR_NO_DEVICE = 5
ERROR_UNSUPPORTED = 6

DTYPES = ("e4m3", "e5m2", "bf16", "f32", "ue8m0")
SCALE_LAYOUTS = ("COMPACT", "GEMM_READY")
GROUPINGS = ("none", "m_contiguous", "m_masked", "k_contiguous")
GROUP_INDICES = ("none", "offsets", "row_group", "masked_m")
SWIGLU_HALVES = ("stacked", "interleaved")
SOURCES = ("memory", "disk", "compiled")
# qgemm_config_field_kind (qgemm_config_value_kind)
CONFIG_FIELD_INT, CONFIG_FIELD_BOOL, CONFIG_FIELD_FAMILY = 0, 1, 2


class RuntimeOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("cache_directory", c_char_p),
                ("disk_cache", c_int32), ("load_eagerly", c_int32),
                ("device", c_int32), ("libcuda", c_char_p)]


class ScaleInfo(Structure):
    _fields_ = [("block_rows", c_int32), ("block_cols", c_int32),
                ("dtype", c_int32), ("layout", c_int32)]


class GemmInfo(Structure):
    _fields_ = [("struct_size", c_size_t), ("grouping", c_int32),
                ("group_index", c_int32), ("alignment", c_int64),
                ("n", c_int64), ("k", c_int64), ("a_dtype", c_int32),
                ("b_dtype", c_int32), ("d_dtype", c_int32),
                ("accumulate", c_int32), ("a_scale", ScaleInfo),
                ("b_scale", ScaleInfo), ("padding_rows_zero", c_int32)]


class ConfigInfo(Structure):
    _fields_ = [("struct_size", c_size_t), ("family", c_int32),
                ("block_m", c_int32), ("block_n", c_int32),
                ("block_k", c_int32), ("stages", c_int32),
                ("threads", c_int32), ("cluster", c_int32),
                ("n_fastest", c_int32), ("raster_band", c_int32),
                ("scale_block_k", c_int32), ("num_sms", c_int64),
                ("shared_bytes", c_int64)]


class LaunchGeometry(Structure):
    _fields_ = [("struct_size", c_size_t), ("grid", c_int64 * 3),
                ("block", c_int32 * 3), ("cluster", c_int32),
                ("shared_bytes", c_int64)]


class GemmArgs(Structure):
    _fields_ = [("struct_size", c_size_t), ("a", c_uint64),
                ("scale_a", c_uint64), ("b", c_uint64), ("scale_b", c_uint64),
                ("d", c_uint64), ("c", c_uint64), ("groups", c_uint64),
                ("rows", c_int64), ("num_groups", c_int64),
                # const int32_t *: an address (array.array's buffer), set
                # without building a ctypes pointer per launch.
                ("host_groups", c_void_p),
                ("host_groups_count", c_int64),
                # API 1.2: device-only group metadata.
                ("flags", c_uint32), ("error_flag", c_uint64),
                ("workspace", c_uint64)]


# API 1.1: quantize, permute and unpermute.
class QuantizeInfo(Structure):
    _fields_ = [("struct_size", c_size_t), ("input_dtype", c_int32),
                ("output_dtype", c_int32), ("has_rowwise", c_int32),
                ("has_columnwise", c_int32), ("rowwise", ScaleInfo),
                ("columnwise", ScaleInfo),
                ("columnwise_transposed", c_int32),
                ("multi_tensor", c_int32), ("k", c_int64),
                # API 1.8: gathered rows.
                ("gather_topk", c_int32), ("gather_probs", c_int32),
                # API 1.9: the weights' AdamW step (-1: none).
                ("adamw_state", c_int32)]


class QuantizeSizes(Structure):
    _fields_ = [("struct_size", c_size_t), ("row_data", c_int64),
                ("row_scales", c_int64), ("col_data", c_int64),
                ("col_scales", c_int64)]


class DispatchInfo(Structure):
    _fields_ = [("struct_size", c_size_t), ("op", c_int32),
                ("backward", c_int32), ("dtype", c_int32),
                ("has_scale", c_int32), ("scale", ScaleInfo),
                ("out_scale", ScaleInfo), ("k", c_int64), ("topk", c_int64),
                ("alignment", c_int64), ("probs", c_int32),
                ("out_dtype", c_int32), ("quantize", c_int32)]


# API 1.3: swiglu_quantize and swiglu_backward.
class SwigluInfo(Structure):
    _fields_ = [("struct_size", c_size_t), ("op", c_int32),
                ("halves", c_int32), ("input_dtype", c_int32),
                ("output_dtype", c_int32), ("has_rowwise", c_int32),
                ("has_columnwise", c_int32), ("rowwise", ScaleInfo),
                ("columnwise", ScaleInfo),
                ("columnwise_transposed", c_int32),
                ("bf16_output", c_int32), ("intermediate", c_int64)]


class SwigluSizes(Structure):
    _fields_ = [("struct_size", c_size_t), ("row_data", c_int64),
                ("row_scales", c_int64), ("col_data", c_int64),
                ("col_scales", c_int64), ("bf16_output", c_int64)]


# -- plans (API 1.5) ---------------------------------------------------------
PLAN_DEBUG_SYNC = 1


def _u64s(*names):
    return [(n, c_uint64) for n in names]


class MoePlanDesc(Structure):
    _fields_ = [("struct_size", c_size_t), ("experts", c_int64),
                ("hidden", c_int64), ("inter", c_int64), ("topk", c_int64),
                ("alignment", c_int64), ("weight_dtype", c_int32)]


class MoeSizes(Structure):
    _fields_ = [("struct_size", c_size_t), ("rows", c_int64),
                ("weight_scales13", c_int64), ("weight_scales2", c_int64),
                ("a_col_scales", c_int64), ("dh_row_scales", c_int64),
                ("dh_col_scales", c_int64), ("forward_workspace", c_int64),
                ("backward_workspace", c_int64)]


MOE_FORWARD_POINTERS = (
    "x", "expert_ids", "probs", "w13", "w2", "w13q", "w13s", "w2q", "w2s",
    "w13q_t", "w13s_t", "w2q_t", "w2s_t", "out", "offsets", "row_group",
    "row_map", "h", "a_col", "a_col_scales", "o", "routing_error",
    "error_flag", "workspace")
MOE_BACKWARD_POINTERS = (
    "grad_out", "x", "expert_ids", "probs", "offsets", "row_group",
    "row_map", "h", "a_col", "a_col_scales", "o", "w13q_t", "w13s_t",
    "w2q_t", "w2s_t", "grad_x", "grad_probs", "grad_w13", "grad_w2",
    "grad_rows", "dh_rows", "dh_row_scales", "dh_cols", "dh_col_scales",
    "error_flag", "workspace")
# qgemm_moe_backward_args.parts
MOE_UNPERMUTE, MOE_DOWN, MOE_UP_DATA, MOE_UP_WEIGHT = 1, 2, 4, 8


def _plan_tail(count):
    return [("workspace_bytes", c_int64), (count, c_int64),
            ("flags", c_uint32)]


class MoeForwardArgs(Structure):
    _fields_ = [("struct_size", c_size_t)] + \
        _u64s(*MOE_FORWARD_POINTERS) + _plan_tail("tokens")


class MoeBackwardArgs(Structure):
    _fields_ = [("struct_size", c_size_t)] + \
        _u64s(*MOE_BACKWARD_POINTERS) + _plan_tail("tokens") + \
        [("parts", c_uint32)]


class GroupedMmPlanDesc(Structure):
    _fields_ = [("struct_size", c_size_t), ("groups", c_int64),
                ("n", c_int64), ("k", c_int64), ("alignment", c_int64),
                ("weight_dtype", c_int32), ("accumulate", c_int32),
                ("input_dtype", c_int32)]


class GroupedMmSizes(Structure):
    _fields_ = [("struct_size", c_size_t), ("x_col_scales", c_int64),
                ("weight_scales", c_int64), ("forward_workspace", c_int64),
                ("backward_workspace", c_int64)]


GMM_FORWARD_POINTERS = ("x", "offsets", "w", "wq", "ws", "wq_t", "ws_t", "y",
                        "x_col", "x_col_scales", "error_flag", "workspace")
GMM_BACKWARD_POINTERS = ("grad_y", "offsets", "x_col", "x_col_scales",
                         "wq_t", "ws_t", "grad_x", "grad_w", "error_flag",
                         "workspace")


class GroupedMmForwardArgs(Structure):
    _fields_ = [("struct_size", c_size_t)] + \
        _u64s(*GMM_FORWARD_POINTERS) + _plan_tail("rows")


class GroupedMmBackwardArgs(Structure):
    _fields_ = [("struct_size", c_size_t)] + \
        _u64s(*GMM_BACKWARD_POINTERS) + _plan_tail("rows")


# API 1.10: an op's operand table, one entry per buffer and direction.
OPERAND_READ, OPERAND_WRITTEN, OPERAND_WRITTEN_BY_SPEC = 0, 1, 2


class OpOperandInfo(Structure):
    _fields_ = [("struct_size", c_size_t), ("field", c_char_p),
                ("name", c_char_p), ("backward", c_int32),
                ("writes", c_int32), ("xla_operand", c_int32),
                ("xla_result", c_int32)]


# One buffer of an op's launch: its public name, its field of the args
# struct, its qgemm_operand_writes, its places in the XLA custom call (-1:
# none).
OpOperand = namedtuple("OpOperand", "name field writes xla_operand xla_result")

_P = c_void_p  # opaque handles
_SIGNATURES = {
    "qgemm_last_error_message": (c_char_p, []),
    "qgemm_last_error_code": (c_int, []),
    "qgemm_api_version": (c_int, []),
    "qgemm_set_reserved_sms": (c_int, [c_int32, POINTER(c_int32)]),
    "qgemm_group_error_string": (c_char_p, [c_int32]),
    "qgemm_version_string": (c_char_p, []),
    "qgemm_runtime_create": (c_int, [POINTER(RuntimeOptions), POINTER(_P)]),
    "qgemm_runtime_destroy": (None, [_P]),
    "qgemm_runtime_cache_directory": (c_char_p, [_P]),
    "qgemm_spec_parse": (c_int, [c_char_p, c_char_p, POINTER(_P)]),
    "qgemm_spec_parse_file": (c_int, [c_char_p, POINTER(_P)]),
    "qgemm_spec_destroy": (None, [_P]),
    "qgemm_spec_count": (c_size_t, [_P]),
    "qgemm_spec_name": (c_char_p, [_P, c_size_t]),
    "qgemm_compile": (c_int, [_P, _P, c_size_t, POINTER(_P)]),
    "qgemm_kernel_destroy": (None, [_P]),
    "qgemm_kernel_name": (c_char_p, [_P]),
    "qgemm_kernel_spec_name": (c_char_p, [_P]),
    "qgemm_kernel_hash": (c_char_p, [_P]),
    "qgemm_kernel_canonical_json": (c_char_p, [_P]),
    "qgemm_kernel_target": (c_char_p, [_P]),
    "qgemm_kernel_ptx": (c_char_p, [_P]),
    "qgemm_kernel_cache_note": (c_char_p, [_P]),
    "qgemm_kernel_source_of": (c_int, [_P]),
    "qgemm_kernel_op": (c_int, [_P]),
    "qgemm_kernel_gemm_info": (c_int, [_P, POINTER(GemmInfo)]),
    "qgemm_kernel_config": (c_int, [_P, POINTER(ConfigInfo)]),
    "qgemm_config_field_count": (c_int32, []),
    "qgemm_config_field_name": (c_char_p, [c_int32]),
    "qgemm_config_field_kind": (c_int32, [c_int32]),
    "qgemm_kernel_config_field": (c_int, [_P, c_char_p, POINTER(c_int64)]),
    "qgemm_family_name": (c_char_p, [c_int32]),
    "qgemm_kernel_launch_geometry":
        (c_int, [_P, c_int64, c_int64, c_int64, POINTER(LaunchGeometry)]),
    "qgemm_kernel_scale_elements":
        (c_int, [_P, c_int64, c_int64, c_void_p, POINTER(c_int64),
                 POINTER(c_int64)]),
    "qgemm_launch_gemm": (c_int, [_P, _P, POINTER(GemmArgs), c_void_p]),
    "qgemm_kernel_load": (c_int, [_P, _P]),
    "qgemm_kernel_quantize_info": (c_int, [_P, POINTER(QuantizeInfo)]),
    "qgemm_kernel_quantize_sizes":
        (c_int, [_P, c_int64, c_int64, c_int64, c_int64, c_void_p,
                 POINTER(QuantizeSizes)]),
    "qgemm_kernel_dispatch_info": (c_int, [_P, POINTER(DispatchInfo)]),
    "qgemm_kernel_permute_rows":
        (c_int, [_P, c_int64, c_int64, POINTER(c_int64)]),
    "qgemm_kernel_swiglu_info": (c_int, [_P, POINTER(SwigluInfo)]),
    "qgemm_kernel_swiglu_sizes":
        (c_int, [_P, c_int64, c_int64, c_int64, c_void_p,
                 POINTER(SwigluSizes)]),
    "qgemm_moe_plan_create":
        (c_int, [_P, POINTER(MoePlanDesc), POINTER(c_void_p)]),
    "qgemm_moe_plan_destroy": (None, [_P]),
    "qgemm_moe_plan_sizes": (c_int, [_P, c_int64, POINTER(MoeSizes)]),
    "qgemm_moe_plan_forward": (c_int, [_P, c_void_p, c_void_p]),
    "qgemm_moe_plan_backward": (c_int, [_P, c_void_p, c_void_p]),
    "qgemm_grouped_mm_plan_create":
        (c_int, [_P, POINTER(GroupedMmPlanDesc), POINTER(c_void_p)]),
    "qgemm_grouped_mm_plan_destroy": (None, [_P]),
    "qgemm_grouped_mm_plan_sizes":
        (c_int, [_P, c_int64, POINTER(GroupedMmSizes)]),
    "qgemm_grouped_mm_plan_forward": (c_int, [_P, c_void_p, c_void_p]),
    "qgemm_grouped_mm_plan_backward": (c_int, [_P, c_void_p, c_void_p]),
    "qgemm_op_name": (c_char_p, [c_int32]),
    "qgemm_op_table_count": (c_int32, []),
    "qgemm_op_table_entry": (c_int32, [c_int32]),
    "qgemm_op_args_size": (c_size_t, [c_int32]),
    "qgemm_op_args_field_count": (c_int32, [c_int32]),
    "qgemm_op_args_field":
        (c_char_p, [c_int32, c_int32, POINTER(c_size_t), POINTER(c_int32)]),
    "qgemm_op_operand_count": (c_int32, [c_int32]),
    "qgemm_op_operand": (c_int, [c_int32, c_int32, POINTER(OpOperandInfo)]),
}


def library_path() -> str:
    """Where libqgemm.so is loaded from: $QGEMM_LIBRARY, else the copy at
    the top of the qgemm package, beside this subpackage (pip install puts
    it there)."""
    env = os.environ.get("QGEMM_LIBRARY")
    if env:
        return env
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(package, "libqgemm.so")


def load() -> ctypes.CDLL:
    path = library_path()
    if not os.path.exists(path):
        raise ImportError(
            "qgemm: %s not found; install the package with pip (it copies "
            "libqgemm.so from the build) or set QGEMM_LIBRARY to a "
            "libqgemm.so" % path)
    lib = ctypes.CDLL(path)
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    version = lib.qgemm_api_version()
    if version // 1000 != API_VERSION // 1000 or version < API_VERSION:
        raise ImportError(
            "qgemm: %s has C API %d; this package needs %d.x, at least %d"
            % (path, version, API_VERSION // 1000, API_VERSION))
    return lib


# API 1.6: the ctypes type of each qgemm_args_field_type.
_ARGS_FIELD_TYPES = {0: c_size_t, 1: c_uint64, 2: c_int64, 3: c_uint32,
                     4: c_void_p, 5: ctypes.c_double}


def _op_args(lib):
    """{op name: ctypes Structure of its qgemm_<op>_args} for every op of
    the library's op table, laid out as the library reports (and checked
    against it field by field), with the argtypes of its
    qgemm_launch_<op>."""
    out = {}
    for index in range(lib.qgemm_op_table_count()):
        op = lib.qgemm_op_table_entry(index)
        name = lib.qgemm_op_name(op).decode()
        fields, offsets = [], []
        for i in range(lib.qgemm_op_args_field_count(op)):
            offset, kind = c_size_t(), ctypes.c_int32()
            field = lib.qgemm_op_args_field(op, i, ctypes.byref(offset),
                                            ctypes.byref(kind))
            fields.append((field.decode(), _ARGS_FIELD_TYPES[kind.value]))
            offsets.append(offset.value)
        cls = type("".join(w.title() for w in name.split("_")) + "Args",
                   (Structure,), {"_fields_": fields})
        laid_out = [getattr(cls, f).offset for f, _ in fields]
        if laid_out != offsets or \
                ctypes.sizeof(cls) != lib.qgemm_op_args_size(op):
            raise ImportError(
                "qgemm: qgemm_%s_args as %s lays it out (offsets %s, %d "
                "bytes) is not what ctypes builds from its fields (offsets "
                "%s, %d bytes)" % (name, library_path(), offsets,
                                   lib.qgemm_op_args_size(op), laid_out,
                                   ctypes.sizeof(cls)))
        launch = getattr(lib, "qgemm_launch_" + name)
        launch.restype = c_int
        launch.argtypes = [_P, _P, POINTER(cls), c_void_p]
        out[name] = cls
    return out


def _op_operands(lib, op_args):
    """{op name: ({public name: OpOperand} of the forward, the same of the
    backward)} for every op of the library's op table, each in its
    struct's order; every field is checked to be a device address of the
    op's args struct (OP_ARGS)."""
    out = {}
    for index in range(lib.qgemm_op_table_count()):
        op = lib.qgemm_op_table_entry(index)
        name = lib.qgemm_op_name(op).decode()
        fields = dict(op_args[name]._fields_)
        directions = ({}, {})
        for i in range(lib.qgemm_op_operand_count(op)):
            info = OpOperandInfo(ctypes.sizeof(OpOperandInfo))
            status = lib.qgemm_op_operand(op, i, ctypes.byref(info))
            if status:
                raise ImportError("qgemm: qgemm_op_operand(%s, %d) of %s: %s"
                                  % (name, i, library_path(),
                                     lib.qgemm_last_error_message().decode()))
            row = OpOperand(info.name.decode(), info.field.decode(),
                            info.writes, info.xla_operand, info.xla_result)
            if fields.get(row.field) is not c_uint64:
                raise ImportError(
                    "qgemm: %s's operand table names %s.%s, which its args "
                    "struct does not have as a device address"
                    % (library_path(), name, row.field))
            directions[1 if info.backward else 0][row.name] = row
        out[name] = directions
    return out


lib = load()
# op name ("quantize", "permute", ...) -> its args struct (ctypes).
OP_ARGS = _op_args(lib)
# op name -> (forward, backward): {public name: OpOperand}.
OP_OPERANDS = _op_operands(lib, OP_ARGS)
# qgemm_op -> its name: grouped_gemm and the ops of the table.
OPS = {op: lib.qgemm_op_name(op).decode() for op in
       [0] + [lib.qgemm_op_table_entry(i)
              for i in range(lib.qgemm_op_table_count())]}
