"""The bits of the device error words qgemm's launches write, and their
text: the group check's (qgemm.h QGEMM_GROUP_ERROR_*) and the routing
check's that a permute of qgemm.torch adds."""
from ._capi import lib
from ._ints import integer

#: Bits of the error word of a launch with device-only group metadata
#: (qgemm.h QGEMM_GROUP_ERROR_*).
GROUP_ERROR_ORDER = 1
GROUP_ERROR_RANGE = 2
GROUP_ERROR_ALIGNMENT = 4
GROUP_ERROR_LAYOUT = 8
#: Bits a permute's routing check contributes to the same word in
#: qgemm.torch (its own error output, bit 0 a duplicate expert id and bit 1
#: an id outside [-1, G), shifted up by 8 so the two kinds never mix).
ROUTING_ERROR_DUPLICATE = 1 << 8
ROUTING_ERROR_RANGE = 1 << 9


def group_error_string(word: int) -> str:
    """What the bits of a device group check's error word say ("" for 0).
    The word is 32 bits, as read from an int32 (negative when bit 31 is
    set) or as an unsigned value."""
    w = integer(word, "word", -2**31, 2**32 - 1)
    return lib.qgemm_group_error_string(w - 2**32 if w >= 2**31 else w
                                        ).decode()


_ROUTING_TEXT = (
    (ROUTING_ERROR_DUPLICATE, "a token names one expert twice in its "
     "routing (the dispatch was launched empty)"),
    (ROUTING_ERROR_RANGE, "an expert id outside [-1, num_experts) in the "
     "routing (the dispatch was launched empty)"))


def error_string(word: int) -> str:
    """What every bit of qgemm.torch's device error word says: the group
    check's (group_error_string) and the routing check's
    (ROUTING_ERROR_*); "" for 0."""
    w = integer(word, "word", -2**31, 2**32 - 1) & 0xffffffff
    parts = [group_error_string(w & 0xff)] if w & 0xff else []
    parts += [text for bit, text in _ROUTING_TEXT if w & bit]
    rest = w & ~(0xff | ROUTING_ERROR_DUPLICATE | ROUTING_ERROR_RANGE)
    if rest:
        parts.append("unknown bits 0x%x" % rest)
    return "; ".join(parts)
