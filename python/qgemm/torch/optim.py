"""The optimizer step that writes the FP8 weights: qgemm.torch.optim.AdamW.

    import qgemm.torch as qt
    experts = qt.MoEExperts(8, 7168, 2048, cache_fp8_weights="forward")
    opt = qt.optim.AdamW(experts.parameters(), lr=1e-4, weight_decay=0.1)
    other = torch.optim.AdamW(rest_of_model.parameters(), fused=True)
    ...
    loss.backward(); opt.step(); other.step()

The step is torch.optim.AdamW(fused=True)'s, element for element (the same
f32 arithmetic, the step count on the device, its bias corrections from
torch's own pow), and
its kernel also quantizes each updated weight into the FP8 form the next
forward reads (128x128 blocks, DeepSeek recipe), in the same pass: the
weights are quantized once per optimizer step, by the optimizer, and no
forward quantizes them. The form goes to the weight's FP8 cache
(qgemm.torch.forward_weights / quantized_weights), stamped with the
weight's new version; a weight changed any other way (a load, an in-place
edit, another optimizer) has a newer version, and the next forward
requantizes it as before.

It takes expert weights only: (G, N, K) bf16 or f32 tensors with N and K
multiples of 128 (MoEExperts' w13 and w2, fp8_grouped_mm's w). The rest of
a model stays with whatever optimizer it uses.
"""
from typing import Callable, Iterable, Optional, Tuple, Union

import torch

from ..core import ArgumentError
from ._fp8_grouped_mm import _check_weights, launch_adamw, weight_cache

__all__ = ["AdamW"]

_STATE_KEYS = ("exp_avg", "exp_avg_sq")


def _check_param(p, where):
    if not isinstance(p, torch.Tensor):
        raise ArgumentError("qgemm.torch.optim.AdamW: %s is a %s, not a "
                            "tensor" % (where, type(p).__name__))
    try:
        _check_weights(p, "deepseek")
    except ArgumentError as e:
        raise ArgumentError(
            "qgemm.torch.optim.AdamW: %s %s: it updates expert weights "
            "(G, N, K) bf16/f32 with N and K multiples of 128 and writes "
            "their FP8 form; give other parameters to another optimizer "
            "(%s)" % (where, tuple(p.shape), e)) from None
    if not p.is_cuda or not p.is_contiguous():
        raise ArgumentError("qgemm.torch.optim.AdamW: %s must be a "
                            "contiguous CUDA tensor (device %s, strides %s)"
                            % (where, p.device, tuple(p.stride())))


def _bias_corrections(step, betas):
    """f32 (2,) on the device: 1 - beta1^t and sqrt(1 - beta2^t) for the
    step count t (a 0-d f32 device tensor) and the f32 betas (2,) on the
    device, as torch's fused AdamW computes them: torch's f32 pow and sqrt
    kernels, the very functions its fused kernel calls, so the bits are
    the same."""
    bc = torch.rsub(torch.pow(betas, step), 1)
    bc[1:].sqrt_()
    return bc


class AdamW(torch.optim.Optimizer):
    """AdamW over expert weights, writing their FP8 forward form in its
    update. lr, betas, eps and weight_decay as torch.optim.AdamW (the same
    defaults); parameter groups and state_dict() / load_state_dict() as any
    torch optimizer. state_dtype: exp_avg and exp_avg_sq's dtype;
    None (the default) is each weight's own dtype, as torch.optim.AdamW
    keeps it, and torch.float32 keeps f32 state for bf16 weights.
    amsgrad, maximize and grad scaling are not supported."""

    def __init__(self, params: Iterable, lr: float = 1e-3,
                 betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, *,
                 state_dtype: Optional[torch.dtype] = None) -> None:
        if isinstance(lr, torch.Tensor):
            raise ArgumentError("qgemm.torch.optim.AdamW: lr must be a "
                                "number (a tensor lr is not supported)")
        try:
            lr, eps, weight_decay = float(lr), float(eps), float(weight_decay)
            betas = (float(betas[0]), float(betas[1]))
        except (TypeError, ValueError, IndexError) as e:
            raise ArgumentError("qgemm.torch.optim.AdamW: lr=%r, betas=%r, "
                                "eps=%r, weight_decay=%r: numbers expected "
                                "(%s)" % (lr, betas, eps, weight_decay, e)
                                ) from None
        if not (0.0 <= lr and 0.0 <= eps and 0.0 <= weight_decay and
                0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ArgumentError(
                "qgemm.torch.optim.AdamW: lr=%r, betas=%r, eps=%r, "
                "weight_decay=%r: lr, eps and weight_decay must be >= 0 and "
                "each beta in [0, 1)" % (lr, betas, eps, weight_decay))
        if state_dtype not in (None, torch.float32, torch.bfloat16):
            raise ArgumentError("qgemm.torch.optim.AdamW: state_dtype %s; "
                                "expected None (the weights' dtype), "
                                "torch.float32 or torch.bfloat16"
                                % (state_dtype,))
        self.state_dtype = state_dtype
        self._betas = {}  # (device, beta1, beta2) -> f32 (2,) on the device
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay))

    def add_param_group(self, param_group: dict) -> None:
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        for i, p in enumerate(group["params"]):
            _check_param(p, "parameter %d of group %d"
                         % (i, len(self.param_groups) - 1))

    def _state_dtype(self, p):
        return self.state_dtype or p.dtype

    def _init_state(self, p):
        state = self.state[p]
        # The step count lives on the device, as torch's fused AdamW keeps
        # it: the kernel reads it, so a captured step replays with its count.
        state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
        for key in _STATE_KEYS:
            state[key] = torch.zeros_like(
                p, dtype=self._state_dtype(p),
                memory_format=torch.contiguous_format)
        return state

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], float]] = None
             ) -> Optional[Union[float, torch.Tensor]]:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            hyper = {k: group[k] for k in ("lr", "betas", "weight_decay",
                                           "eps")}
            for p in group["params"]:
                if p.grad is None:
                    continue
                self._update(p, hyper)
        return loss

    def _update(self, p, hyper):
        grad = p.grad
        if grad.is_sparse:
            raise ArgumentError("qgemm.torch.optim.AdamW: sparse gradients "
                                "are not supported")
        if grad.dtype != p.dtype or grad.shape != p.shape:
            raise ArgumentError(
                "qgemm.torch.optim.AdamW: the gradient of a %s %s weight "
                "is %s %s; expected the weight's dtype and shape"
                % (p.dtype, tuple(p.shape), grad.dtype, tuple(grad.shape)))
        state = self.state[p] or self._init_state(p)
        state["step"] += 1
        cache = weight_cache(p, "deepseek", transposed=False)
        launch_adamw(p.detach(), grad.contiguous(), state["exp_avg"],
                     state["exp_avg_sq"],
                     _bias_corrections(state["step"],
                                       self._device_betas(p, hyper)), hyper,
                     "deepseek", (cache.wq, cache.ws, cache.wq_t, cache.ws_t))
        # The kernel wrote p: its version moves on as after any in-place
        # update, and the cache is stamped with that version, so the
        # forward reads the form just written instead of requantizing.
        torch.autograd.graph.increment_version(p)
        cache.stamp[0] = p._version

    def _device_betas(self, p, hyper):
        # Made once per device and betas: no host-to-device copy a step.
        key = (p.device, *hyper["betas"])
        betas = self._betas.get(key)
        if betas is None:
            betas = self._betas[key] = torch.tensor(
                list(hyper["betas"]), dtype=torch.float32, device=p.device)
        return betas

    def load_state_dict(self, state_dict: dict) -> None:
        # torch casts floating-point state to each parameter's dtype on
        # load; f32 state of bf16 weights keeps its f32 values here.
        saved = state_dict["state"]
        super().load_state_dict(state_dict)
        ids = [i for g in state_dict["param_groups"] for i in g["params"]]
        params = [p for g in self.param_groups for p in g["params"]]
        for i, p in zip(ids, params):
            if i in saved:
                for key in _STATE_KEYS:
                    if key in saved[i]:
                        # A copy: the dict may hold this very optimizer's
                        # tensors, which its next step updates in place.
                        self.state[p][key] = saved[i][key].to(
                            device=p.device, dtype=self._state_dtype(p),
                            memory_format=torch.contiguous_format,
                            copy=True)
                self.state[p]["step"] = torch.as_tensor(
                    saved[i]["step"], dtype=torch.float32,
                    device=p.device).reshape(()).clone()
