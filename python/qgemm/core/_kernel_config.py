"""A kernel's configuration as Python reads it: the fields are listed by
the C API (qgemm_config_field_*), which takes them from their one
definition (dialect/include/qgemm/KernelConfigFields.def)."""
import ctypes
from collections import namedtuple

from . import _capi
from ._capi import lib
from ._runtime import check


def _config_fields():
    """(name, kind) of each configuration field, as the C API lists them:
    the fields are defined once, in KernelConfigFields.def, so a new one
    appears here without a change to this package."""
    return tuple((lib.qgemm_config_field_name(i).decode(),
                  lib.qgemm_config_field_kind(i))
                 for i in range(lib.qgemm_config_field_count()))


_CONFIG_FIELDS = _config_fields()
Config = namedtuple("Config", [name for name, _ in _CONFIG_FIELDS])


def _config_of(handle):
    """The kernel's Config: the family by name, flags as bools."""
    values = []
    value = ctypes.c_int64()
    for name, kind in _CONFIG_FIELDS:
        check(lib.qgemm_kernel_config_field(handle, name.encode(),
                                            ctypes.byref(value)))
        if kind == _capi.CONFIG_FIELD_FAMILY:
            values.append(lib.qgemm_family_name(value.value).decode())
        elif kind == _capi.CONFIG_FIELD_BOOL:
            values.append(bool(value.value))
        else:
            values.append(value.value)
    return Config(*values)
