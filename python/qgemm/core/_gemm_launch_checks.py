"""The slow path of a grouped_gemm launch (_gemm_launch.GemmLaunch): when
the fast path's comparisons fail, these methods find which operand is
wrong and say how, in the ArgumentError the caller sees; and the scale
element counts of the kernel's layouts. A mixin: GemmLaunch holds the
plan they read (expected dtypes, shape rule, scale blocks)."""
import ctypes
import math

from . import _tensors
from ._capi import lib
from ._errors import ArgumentError
from ._runtime import check

_SCALE_CACHE_LIMIT = 256  # distinct (rows, G) kept per kernel


class GemmLaunchChecks:
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
