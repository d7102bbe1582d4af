"""A process group for the overlapped exchange: NCCL's kernels capped at
the SMs the layer's GEMMs leave free."""
from typing import Optional, Sequence

import torch.distributed as dist

from ...core import ArgumentError

# SMs the chunks' GEMMs leave to NCCL, and the CTAs overlap_group() lets
# NCCL use: the same number, so the exchange never waits for a GEMM grid.
DEFAULT_COMM_SMS = 16


def overlap_group(ranks: Optional[Sequence[int]] = None,
                  comm_sms: int = DEFAULT_COMM_SMS
                  ) -> "dist.ProcessGroup":
    """A new NCCL process group over `ranks` (default: every rank) whose
    communicator launches at most `comm_sms` CTAs per collective
    (ncclConfig_t.maxCTAs), for ep.moe_experts(group=..., comm_sms=...)
    with the same number. Every rank must call it, as dist.new_group."""
    if not isinstance(comm_sms, int) or isinstance(comm_sms, bool) or \
            not 1 <= comm_sms <= 64:
        raise ArgumentError("ep.overlap_group: comm_sms = %r; expected an "
                            "int in [1, 64]" % (comm_sms,))
    options = getattr(dist, "ProcessGroupNCCL", None)
    options = options.Options() if options is not None else None
    config = getattr(options, "config", None)
    if config is None or not hasattr(config, "max_ctas"):
        raise ArgumentError(
            "ep.overlap_group: this torch build cannot set NCCL's CTA limit "
            "per group (ProcessGroupNCCL.Options().config.max_ctas); set "
            "NCCL_MAX_CTAS=%d in the environment instead" % comm_sms)
    config.max_ctas = comm_sms
    return dist.new_group(ranks, backend="nccl", pg_options=options)
