"""Integers on their way into C: checked here, because ctypes would wrap an
out-of-range int silently (2**40 becomes 0 in an int32) and answers a float
or a string with an exception that does not say which argument it was."""
import operator

from ._errors import ArgumentError

INT32 = (-2**31, 2**31 - 1)
INT64 = (-2**63, 2**63 - 1)


def integer(value, name, lo, hi):
    """`value` as an int in [lo, hi]; anything else raises ArgumentError
    naming `name`. Accepts what indexes a list (int, NumPy integers),
    not bool."""
    if isinstance(value, bool):
        raise ArgumentError("%s must be an integer, not a bool (%r)"
                            % (name, value))
    try:
        v = operator.index(value)
    except TypeError:
        raise ArgumentError("%s must be an integer, not %s (%s)"
                            % (name, type(value).__name__,
                               _short(value))) from None
    if not lo <= v <= hi:
        raise ArgumentError("%s = %d is out of range; allowed: %d..%d"
                            % (name, v, lo, hi))
    return v


def int32_list(values, name):
    """A list of int32 values from a sequence, naming the first element
    that is not one (`name[i]`)."""
    try:
        items = list(values)
    except TypeError:
        raise ArgumentError("%s must be a sequence of integers, not %s"
                            % (name, type(values).__name__)) from None
    return [integer(v, "%s[%d]" % (name, i), *INT32)
            for i, v in enumerate(items)]


def _short(value):
    text = repr(value)
    return text if len(text) <= 64 else text[:61] + "..."
