"""Expert parallelism with qgemm.jax: each device holds G / D experts.

    python3 examples/jax/moe_shard_map.py     # any number of GPUs, >= 1

Two forms, both inside shard_map over the mesh axis "ep":

- the whole expert layer (expert_parallel_layer): every device sees every
  token and its routing, keeps the slots routed to its own experts (the
  others become -1, dropped), runs qgemm.jax.moe_experts on them with its
  shard of w13 and w2, and the partial outputs are summed over the axis;
- the grouped matmul alone (expert_parallel): tokens arrive already
  dispatched, rows sorted by local expert, each group's size a multiple of
  16 (qgemm's grouping alignment), padded with zero rows at the end of each
  device's block."""
import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

try:
    from jax import shard_map
except ImportError:  # older JAX
    from jax.experimental.shard_map import shard_map

import qgemm.jax as qj


def expert_parallel(mesh):
    """gmm over the mesh's "ep" axis: x (D*T, K) and group sizes (D*L,)
    sharded by device, w (G, K, N) by expert; each device multiplies its
    tokens by its L = G / D experts."""
    def expert_ffn(x, w, sizes):          # one device's shard
        return qj.gmm(x, w, sizes)

    # check_vma=False: the custom calls' results carry no varying-axis
    # type, so JAX's check of the VJP's cotangent types is switched off.
    return shard_map(expert_ffn, mesh=mesh,
                     in_specs=(P("ep", None), P("ep", None, None), P("ep")),
                     out_specs=P("ep", None), check_vma=False)


def expert_parallel_layer(mesh, experts):
    """moe_experts over the mesh's "ep" axis: x (T, H), expert_ids and
    probs (T, topk) replicated, w13 (E, 2I, H) and w2 (E, H, I) sharded by
    expert; returns (T, H), replicated."""
    devices = mesh.shape["ep"]
    local = experts // devices

    def shard(x, ids, probs, w13, w2):    # one device's experts
        first = jax.lax.axis_index("ep") * local
        mine = (ids >= first) & (ids < first + local)
        out = qj.moe_experts(x, jnp.where(mine, ids - first, -1), probs,
                             w13, w2)
        return jax.lax.psum(out, "ep")

    return jax.jit(shard_map(
        shard, mesh=mesh,
        in_specs=(P(), P(), P(), P("ep", None, None), P("ep", None, None)),
        out_specs=P(), check_vma=False))


def train_step(ffn_ep):
    """The loss and its gradients in x and w, jitted: forward and backward
    of every device's shard in one XLA program."""
    @jax.jit
    def step(x, w, sizes):
        def loss(x, w):
            return jnp.mean(ffn_ep(x, w, sizes).astype(jnp.float32) ** 2)
        return jax.value_and_grad(loss, argnums=(0, 1))(x, w)
    return step


def main(experts=8, tokens_per_device=4096, hidden=1024, ffn=1536):
    devices = np.array(jax.devices())
    d = len(devices)
    assert experts % d == 0, "experts must divide over the devices"
    mesh = Mesh(devices, ("ep",))
    local = experts // d
    key = jax.random.PRNGKey(0)
    kx, kw = jax.random.split(key)
    x = jax.random.normal(kx, (d * tokens_per_device, hidden), jnp.bfloat16)
    w = (jax.random.normal(kw, (experts, hidden, ffn)) / hidden ** 0.5
         ).astype(jnp.bfloat16)
    # Every device: its local experts' group sizes (multiples of 16).
    per = tokens_per_device // local // 16 * 16
    sizes = jnp.full((d * local,), per, jnp.int32)

    x = jax.device_put(x, NamedSharding(mesh, P("ep", None)))
    w = jax.device_put(w, NamedSharding(mesh, P("ep", None, None)))
    sizes = jax.device_put(sizes, NamedSharding(mesh, P("ep")))

    ffn_ep = expert_parallel(mesh)
    value, (dx, dw) = train_step(ffn_ep)(x, w, sizes)
    ref = jax.lax.ragged_dot(x[:tokens_per_device], w[:local],
                             sizes[:local])
    got = ffn_ep(x, w, sizes)[:tokens_per_device]
    err = float(jnp.linalg.norm((got - ref).astype(jnp.float32)) /
                jnp.linalg.norm(ref.astype(jnp.float32)))
    finite = bool(jnp.isfinite(value)) and bool(jnp.all(jnp.isfinite(dw)))
    print("devices %d, loss %.4f, dw %s, finite %s, shard 0 rel. error vs "
          "ragged_dot %.4f" % (d, float(value), dw.shape, finite, err))
    return err, finite


def main_layer(experts=8, tokens=4096, hidden=1024, inter=512, topk=4):
    """The expert layer over every device, against the same layer on one."""
    devices = np.array(jax.devices())
    d = len(devices)
    assert experts % d == 0, "experts must divide over the devices"
    mesh = Mesh(devices, ("ep",))
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((tokens, hidden)), jnp.bfloat16)
    ids = np.argsort(rng.random((tokens, experts)), axis=1)[:, :topk]
    probs = jax.nn.softmax(jnp.asarray(
        rng.standard_normal((tokens, topk)), jnp.float32))
    w13 = jnp.asarray(rng.standard_normal((experts, 2 * inter, hidden)) /
                      hidden ** 0.5, jnp.bfloat16)
    w2 = jnp.asarray(rng.standard_normal((experts, hidden, inter)) /
                     inter ** 0.5, jnp.bfloat16)
    ids = jnp.asarray(ids, jnp.int32)
    shard = NamedSharding(mesh, P("ep", None, None))
    got = expert_parallel_layer(mesh, experts)(
        x, ids, probs, jax.device_put(w13, shard), jax.device_put(w2, shard))
    want = qj.moe_experts(x, ids, probs, w13, w2)
    err = float(jnp.linalg.norm((got - want).astype(jnp.float32)) /
                jnp.linalg.norm(want.astype(jnp.float32)))
    print("devices %d, expert layer over the mesh vs one device: rel. "
          "difference %.2e" % (d, err))
    return err


if __name__ == "__main__":
    main()
    main_layer()
