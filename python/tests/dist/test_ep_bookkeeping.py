"""qgemm.torch.ep's bookkeeping on the CPU over torch.distributed's gloo
backend: the all_to_all of counts and error words (Exchange), the local
expert of every received row, the received rows' order in expert order
(the contract permute_received hands to the permute kernel) against a
per-token reference, and the ranks raising together on one rank's error
word. The rows themselves travel through a real gloo all_to_all."""
import os
import socket
import tempfile
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from qgemm import ROUTING_ERROR_RANGE, ArgumentError
from qgemm.torch.ep import _capacity as cap
from qgemm.torch.ep._chunks import ChunkPlan
from qgemm.torch.ep._exchange import raise_if_any_rank
from qgemm.torch import ep, ErrorMode, set_error_mode

HIDDEN = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def routing(rank, tokens, experts, topk, empty_rank=None, one_rank=None):
    """Rank `rank`'s expert ids (tokens, topk): distinct experts per token,
    some slots dropped (-1); no copy to `empty_rank`'s experts, or every
    copy to `one_rank`'s."""
    g = torch.Generator().manual_seed(100 + rank)
    n_local = experts // 2 if one_rank is not None else experts
    ids = torch.stack([torch.randperm(n_local, generator=g)[:topk]
                       for _ in range(tokens)]).int()
    if one_rank is not None:
        ids += one_rank * (experts // 2)
    if empty_rank is not None:
        el = experts // 2
        owned = (ids // el) == empty_rank
        ids = torch.where(owned, torch.full_like(ids, -1), ids)
    drop = torch.rand(tokens, topk, generator=g) < 0.1
    return torch.where(drop, torch.full_like(ids, -1), ids)


def token_rows(rank, tokens):
    """A row per token naming it: (rank, token, 0, 0) as floats."""
    t = torch.arange(tokens, dtype=torch.float32)
    return torch.stack([torch.full_like(t, rank), t, 0 * t, 0 * t], dim=1)


def dispatch(rank, world, experts, case, result):
    """One rank of a two- or three-rank gloo dispatch and its check."""
    tokens, topk = 37 + 5 * rank, 3
    ids = routing(rank, tokens, experts, topk, **case.get("routing", {}))
    flat = ids.reshape(-1)
    keep = (flat >= 0).nonzero().squeeze(1)
    # The source side, as permute_quantize lays it out with alignment 1:
    # copies in global expert order, token order inside an expert.
    order = keep[torch.argsort(flat[keep], stable=True)]
    counts = torch.bincount(flat[keep].long(), minlength=experts).int()
    error = torch.tensor([case.get("errors", {}).get(rank, 0)],
                         dtype=torch.int32)
    ex = ep.exchange_counts(counts, None, error)
    raised = None
    try:
        raise_if_any_rank(ex)
    except ArgumentError as e:
        raised = str(e)
    send = token_rows(rank, tokens)[order // topk]
    recv = torch.empty(ex.rows_received, HIDDEN)
    dist.all_to_all_single(recv, send, ex.recv, ex.send)
    local = ep.received_expert_ids(ex.recv_counts,
                                   ex.rows_received).squeeze(1)
    # permute_received's contract: in expert e, source 0's rows first,
    # each source's rows in its token order.
    placed = recv[torch.argsort(local, stable=True)]
    ends = torch.bincount(local.long(),
                          minlength=experts // world).cumsum(0).tolist()
    try:
        ep.local_experts(world * 2 + 1)
        uneven = None
    except ArgumentError as e:
        uneven = str(e)
    result[rank] = dict(uneven=uneven, ids=ids, send=ex.send, recv=ex.recv,
                        recv_counts=ex.recv_counts.tolist(),
                        errors=ex.errors, placed=placed, ends=ends,
                        raised=raised)


def dispatch_capacity(rank, world, experts, capacity, result):
    """The fixed-capacity layout (qgemm/torch/ep/_capacity.py) through a
    gloo all_to_all with equal splits: what each local expert receives."""
    tokens, topk = 37 + 5 * rank, 3
    ids = routing(rank, tokens, experts, topk)
    flat = ids.reshape(-1)
    keep = (flat >= 0).nonzero().squeeze(1)
    order = keep[torch.argsort(flat[keep], stable=True)]
    counts = torch.bincount(flat[keep].long(), minlength=experts).int()
    kept = cap.kept_counts(counts, capacity)
    rows = token_rows(rank, tokens)[order // topk]
    send = rows[cap.send_rows(counts, capacity, rows.shape[0])]
    el = experts // world
    send_k = torch.cat([kept.view(world, el),
                        torch.zeros(world, 1, dtype=torch.int32)], 1)
    recv_k = torch.empty_like(send_k)
    dist.all_to_all_single(recv_k, send_k)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    local = cap.received_slot_ids(recv_k[:, :el], capacity).squeeze(1)
    placed = [recv[local == e, :2].tolist() for e in range(el)]
    # The source's copies seen through their slots: slot_of_copies.
    row_map = torch.full((tokens * topk,), -1, dtype=torch.int32)
    row_map[order] = torch.arange(order.numel(), dtype=torch.int32)
    row_group = flat[order].int()
    slots = cap.slot_of_copies(row_map.view(tokens, topk), row_group,
                               counts, capacity)
    result[rank] = dict(ids=ids, placed=placed, slots=slots,
                        dropped=int((counts - kept).sum()))


def dispatch_chunked(rank, world, experts, chunks, result):
    """The overlapped exchange's layout (qgemm/torch/ep/_chunks.py): the
    source sorts its copies by virtual expert id, the counts travel in
    global order, and each chunk's rows move in one all_to_all with that
    chunk's splits. Result in dispatch()'s form, the chunks' received
    rows one after the other (their experts are consecutive)."""
    tokens, topk = 37 + 5 * rank, 3
    ids = routing(rank, tokens, experts, topk)
    if isinstance(chunks, list):  # each rank proposes its own
        chunks = chunks[rank]

    def layout(plan):
        flat = plan.relabel(ids).reshape(-1)
        keep = (flat >= 0).nonzero().squeeze(1)
        order = keep[torch.argsort(flat[keep], stable=True)]
        counts = torch.bincount(flat[keep].long(), minlength=experts).int()
        return order, counts
    plan = ChunkPlan(experts // world, world, chunks)
    order, counts = layout(plan)
    ex = ep.exchange_counts(plan.to_global(counts), None, None, plan)
    if ex.chunks != plan.count:  # as qgemm.torch.ep's exact dispatch does
        plan = ChunkPlan(experts // world, world, ex.chunks)
        order, _ = layout(plan)
    rows = token_rows(rank, tokens)[order // topk]
    placed, local, start = [], [], 0
    for c in range(plan.count):
        send = rows[start:start + sum(ex.send_chunks[c])]
        start += send.shape[0]
        recv = torch.empty(sum(ex.recv_chunks[c]), HIDDEN)
        dist.all_to_all_single(recv, send, ex.recv_chunks[c],
                               ex.send_chunks[c])
        ids_c = ep.received_expert_ids(
            ex.recv_counts[:, plan.experts(c)].contiguous(),
            recv.shape[0]).squeeze(1)
        placed.append(recv[torch.argsort(ids_c, stable=True)])
        local.append(ids_c + plan.bounds[c])
    local = torch.cat(local)
    ends = torch.bincount(local.long(),
                          minlength=experts // world).cumsum(0).tolist()
    result[rank] = dict(ids=ids, send=ex.send, recv=ex.recv,
                        send_chunks=ex.send_chunks,
                        recv_chunks=ex.recv_chunks,
                        recv_counts=ex.recv_counts.tolist(),
                        errors=ex.errors, placed=torch.cat(placed),
                        ends=ends, raised=None, agreed=ex.chunks)


def worker(rank, world, port, experts, cases, path):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        results = {}
        for name, case in cases.items():
            set_error_mode(case.get("mode", ErrorMode.RAISE))
            result = {}
            if "chunks" in case:
                dispatch_chunked(rank, world, experts, case["chunks"], result)
            elif "capacity" in case:
                dispatch_capacity(rank, world, experts, case["capacity"],
                                  result)
            else:
                dispatch(rank, world, experts, case, result)
            results[name] = result[rank]
        torch.save(results, "%s.%d" % (path, rank))
    finally:
        dist.destroy_process_group()


def run(world, experts, cases):
    """Every case on one process group of `world` gloo ranks (one spawn:
    starting the processes is most of the time)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rank")
        mp.spawn(worker, args=(world, free_port(), experts, cases, path),
                 nprocs=world)
        per_rank = [torch.load("%s.%d" % (path, r)) for r in range(world)]
    return {name: [p[name] for p in per_rank] for name in cases}


TWO_RANK_CASES = {
    "plain": {},
    "empty_rank": {"routing": {"empty_rank": 1}},
    "one_rank": {"routing": {"one_rank": 0}},
    "error": {"errors": {1: ROUTING_ERROR_RANGE}},
    "silent": {"errors": {0: ROUTING_ERROR_RANGE},
               "mode": ErrorMode.SILENT},
    "capacity_fits": {"capacity": 64},
    "capacity_drops": {"capacity": 5},
    # Four experts per rank in three chunks: sizes 1, 1, 2.
    "chunks": {"chunks": 3},
    "one_chunk": {"chunks": 1},
    # Rank 0 proposes 3 chunks, rank 1 two: both take 2.
    "chunks_disagree": {"chunks": [3, 2]},
}


_RUNS = {}


def runs():
    """Both process groups' results, run once for every test class."""
    if not _RUNS:
        _RUNS["two"] = run(2, 8, TWO_RANK_CASES)
        _RUNS["three"] = run(3, 6, {"plain": {}, "chunks": {"chunks": 2}})
    return _RUNS


class ExchangeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.two, cls.three = runs()["two"], runs()["three"]

    def check(self, out, experts):
        world = len(out)
        el = experts // world
        for r in range(world):
            mine = out[r]
            for s in range(world):
                ids = out[s]["ids"]
                owned = (ids // el == r) & (ids >= 0)
                # Counts: what s sent to r, and per local expert.
                self.assertEqual(mine["recv"][s], int(owned.sum()))
                self.assertEqual(out[s]["send"][r], int(owned.sum()))
                for e in range(el):
                    self.assertEqual(mine["recv_counts"][s][e],
                                     int((ids == r * el + e).sum()))
            # The rows of local expert e: every (source, token) routed to
            # global expert r*el+e, sources in rank order, tokens in order.
            start = 0
            for e, end in enumerate(mine["ends"]):
                want = []
                for s in range(world):
                    ids = out[s]["ids"]
                    tok = (ids == r * el + e).any(1).nonzero().squeeze(1)
                    want += [(float(s), float(t)) for t in tok.tolist()]
                got = [tuple(row[:2].tolist())
                       for row in mine["placed"][start:end]]
                self.assertEqual(got, want, (r, e))
                start = end
        return out

    def test_two_ranks(self):
        out = self.check(self.two["plain"], 8)
        self.assertIn("5 experts do not split evenly over 2 ranks",
                      out[0]["uneven"])
        self.assertEqual([o["raised"] for o in out], [None, None])

    def test_three_ranks(self):
        self.check(self.three["plain"], 6)

    def test_rank_that_receives_nothing(self):
        out = self.check(self.two["empty_rank"], 8)
        self.assertEqual(sum(out[1]["recv"]), 0)
        self.assertEqual(out[1]["ends"], [0, 0, 0, 0])

    def test_all_tokens_to_one_rank(self):
        out = self.check(self.two["one_rank"], 8)
        self.assertEqual(sum(out[1]["recv"]), 0)
        self.assertGreater(sum(out[0]["recv"]), 0)

    def test_every_rank_raises_on_one_ranks_error_word(self):
        out = self.check(self.two["error"], 8)
        for r in range(2):
            self.assertEqual(out[r]["errors"], [0, ROUTING_ERROR_RANGE])
            self.assertIn("rank 1", out[r]["raised"])
            self.assertIn("outside [-1, num_experts)", out[r]["raised"])
            self.assertNotIn("rank 0", out[r]["raised"])

    def test_silent_mode_does_not_raise(self):
        out = self.check(self.two["silent"], 8)
        self.assertEqual([o["raised"] for o in out], [None, None])
        self.assertEqual(out[1]["errors"], [ROUTING_ERROR_RANGE, 0])


class ChunkedExchangeTest(unittest.TestCase):
    """Each chunk's all_to_all brings every local expert of the chunk the
    rows the single exchange brings it, in the same order; the chunks'
    splits add up to the single exchange's."""
    check = ExchangeTest.check

    @classmethod
    def setUpClass(cls):
        cls.two, cls.three = runs()["two"], runs()["three"]

    def check_chunks(self, out, experts, chunks):
        self.check(out, experts)
        for o in out:
            self.assertEqual(len(o["send_chunks"]), chunks)
            self.assertEqual([sum(c) for c in zip(*o["send_chunks"])],
                             o["send"])
            self.assertEqual([sum(c) for c in zip(*o["recv_chunks"])],
                             o["recv"])
        return out

    def test_uneven_chunks_two_ranks(self):
        self.check_chunks(self.two["chunks"], 8, 3)

    def test_one_chunk_is_the_single_exchange(self):
        self.check_chunks(self.two["one_chunk"], 8, 1)
        for mine, plain in zip(self.two["one_chunk"], self.two["plain"]):
            self.assertEqual(mine["send"], plain["send"])

    def test_ranks_that_propose_different_chunks_take_the_fewest(self):
        out = self.check_chunks(self.two["chunks_disagree"], 8, 2)
        self.assertEqual([o["agreed"] for o in out], [2, 2])

    def test_chunks_three_ranks(self):
        self.check_chunks(self.three["chunks"], 6, 2)


class CapacityTest(unittest.TestCase):
    """The fixed-capacity layout: each local expert receives, from each
    source in rank order, that source's first `capacity` copies of it in
    token order; the rest are dropped, and each copy's slot points at its
    row or is -1."""

    def check(self, out, experts, capacity):
        world = len(out)
        el = experts // world
        for r in range(world):
            for e in range(el):
                want = []
                for s in range(world):
                    ids = out[s]["ids"]
                    tok = (ids == r * el + e).any(1).nonzero().squeeze(1)
                    want += [[float(s), float(t)]
                             for t in tok.tolist()[:capacity]]
                self.assertEqual(out[r]["placed"][e], want, (r, e))
        for s in range(world):
            ids, slots = out[s]["ids"], out[s]["slots"]
            dropped = 0
            for g in range(experts):
                tok, j = (ids == g).nonzero(as_tuple=True)
                for i, (t, jj) in enumerate(zip(tok.tolist(), j.tolist())):
                    want = g * capacity + i if i < capacity else -1
                    dropped += i >= capacity
                    self.assertEqual(int(slots[t, jj]), want, (s, g, i))
            self.assertTrue(bool((slots[ids < 0] == -1).all()))
            self.assertEqual(out[s]["dropped"], dropped)
        return out

    def test_capacity_that_fits_drops_nothing(self):
        out = self.check(runs()["two"]["capacity_fits"], 8, 64)
        self.assertEqual([o["dropped"] for o in out], [0, 0])

    def test_capacity_past_which_copies_drop(self):
        out = self.check(runs()["two"]["capacity_drops"], 8, 5)
        self.assertGreater(sum(o["dropped"] for o in out), 0)


class ReceivedIdsTest(unittest.TestCase):
    def test_against_a_loop(self):
        g = torch.Generator().manual_seed(7)
        counts = torch.randint(0, 4, (3, 5), generator=g, dtype=torch.int32)
        counts[1] = 0
        want = [e for s in range(3) for e in range(5)
                for _ in range(int(counts[s, e]))]
        got = ep.received_expert_ids(counts).squeeze(1).tolist()
        self.assertEqual(got, want)
        self.assertEqual(ep.received_expert_ids(counts).dtype, torch.int32)



if __name__ == "__main__":
    unittest.main()
