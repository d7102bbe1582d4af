"""GPU tests of qgemm.torch.ep, the FP8 expert layer split over the ranks
of a torch.distributed group, on up to 4 GPUs with NCCL (NVLink multicast
off; QGEMM_EP_TEST_RANKS sets the count). The ranks run
examples/python/ep_train.py's
training loop: forward and backward of the split layer against the same
layer on one GPU holding all experts, every step (the budget is the
example's: out, dx, dprobs, dw2 within 2e-3 of the single-GPU layer --
the same kernels see the same rows -- and dw13 within 0.05, one more e4m3
rounding). Cases: random top-4 routing with 6% of the slots dropped; every
token routed to rank 0's experts (the other ranks receive nothing); rank
1's slots all dropped (it sends nothing); the overlapped chunks against
one chunk (the same bits, exact and fixed-capacity dispatch, chunk sizes
even and uneven); the fixed-capacity dispatch with
room for every copy (the exact dispatch's bits), with copies dropped
past it (against the single-GPU layer with those copies dropped, and
their count), and captured in a CUDA graph (replays equal eager runs,
also after new inputs and weights); a rank without tokens, in both
modes. And the loud failure: an expert id
out of range on rank 1 makes both ranks raise qgemm.ArgumentError in the
same call (none waits in a collective), and after reset_errors() on rank
1 both train again.

Skipped without torch or without two CUDA devices.
"""
import os
import socket
import sys
import tempfile
import unittest

try:
    import torch
except ImportError:
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples",
                                "python"))

TWO_GPUS = torch is not None and torch.cuda.device_count() >= 2
RANKS = int(os.environ.get("QGEMM_EP_TEST_RANKS", "0")) or (
    min(torch.cuda.device_count(), 4) if TWO_GPUS else 2)
# Four experts per rank: top-4 routing fits in rank 0's experts alone.
SHAPE = dict(experts=4 * RANKS, hidden=1024, inter=512, tokens=512, topk=4)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def route_all_to_rank0(rank, ids):
    # Experts 0..3 belong to rank 0: slot j of every token to expert j
    # (distinct per token; the dropped slots stay dropped).
    slots = torch.arange(ids.shape[1], dtype=ids.dtype).expand_as(ids)
    return torch.where(ids >= 0, slots, ids)


def route_rank1_drops_all(rank, ids):
    return torch.full_like(ids, -1) if rank == 1 else ids


def route_rank1_out_of_range(rank, ids):
    if rank == 1:
        ids = ids.clone()
        ids[3, 0] = SHAPE["experts"]
    return ids


ROUTES = {"random": None, "all_to_rank0": route_all_to_rank0,
          "rank1_drops_all": route_rank1_drops_all}


def worker(rank, world, port, path):
    import torch.distributed as dist
    import ep_train
    import qgemm
    import qgemm.torch as qt
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      NCCL_NVLS_ENABLE="0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    out = {}
    try:
        qt.set_error_mode("raise")
        qt.error_word()
        for name, route in ROUTES.items():
            problem = ep_train.make_problem(world, route=route, **SHAPE)
            out[name] = ep_train.train(problem, steps=2)
        # Chunks against one chunk: 3 chunks of 4 experts are uneven.
        problem = ep_train.make_problem(world, **SHAPE)
        out["chunks_exact"] = max(
            ep_train.chunking_difference(problem, chunks=n) for n in (2, 3))
        out["chunks_capacity"] = ep_train.chunking_difference(
            problem, chunks=4, capacity=256)
        out["chunks_train"] = ep_train.train(problem, steps=2, chunks=4)
        # Fixed capacity: room for every copy (the most tokens of a rank),
        # then 0.8 of the copies an expert gets from a rank on average.
        problem = ep_train.make_problem(world, **SHAPE)
        mean = SHAPE["tokens"] * SHAPE["topk"] // SHAPE["experts"]
        for name, capacity in (("capacity_fits",
                                SHAPE["tokens"] + 64 * (world - 1)),
                               ("capacity_drops", mean * 4 // 5)):
            out[name] = ep_train.train(problem, steps=2, capacity=capacity)
        # Captured with its exchange in 4 overlapped chunks.
        out["graph_worst"] = ep_train.graph_replay(problem, capacity=256,
                                                   chunks=4)
        # A rank without tokens still takes part in every exchange.
        empty = ep_train.make_problem(
            world, sizes=[0 if r == 1 else SHAPE["tokens"]
                          for r in range(world)], **SHAPE)
        out["no_tokens"] = ep_train.train(empty, steps=1)
        out["no_tokens_capacity"] = ep_train.train(empty, steps=1,
                                                   capacity=256)
        # One rank's bad routing: both raise in the same call.
        problem = ep_train.make_problem(world, route=route_rank1_out_of_range,
                                        **SHAPE)
        try:
            ep_train.train(problem, steps=1)
            out["error"] = None
        except qgemm.ArgumentError as e:
            out["error"] = str(e)
        if rank == 1:
            qt.reset_errors()
        dist.barrier()
        problem = ep_train.make_problem(world, **SHAPE)
        out["after_reset"] = ep_train.train(problem, steps=1)
    finally:
        torch.save(out, "%s.%d" % (path, rank))
        dist.destroy_process_group()


@unittest.skipUnless(TWO_GPUS and torch.cuda.device_count() >= RANKS,
                     "needs torch and %d CUDA devices" % RANKS)
class ExpertParallelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch.multiprocessing as mp
        import ep_train
        cls.ep_train = ep_train
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "rank")
            mp.spawn(worker, args=(RANKS, free_port(), path), nprocs=RANKS)
            cls.out = [torch.load("%s.%d" % (path, r))
                       for r in range(RANKS)]
        for r, o in enumerate(cls.out):
            print("rank %d graph replay worst difference %s"
                  % (r, o.get("graph_worst")))
            print("rank %d chunks vs one chunk: exact %s, capacity %s"
                  % (r, o.get("chunks_exact"), o.get("chunks_capacity")))
            for name in list(ROUTES) + ["chunks_train", "capacity_fits",
                                        "capacity_drops",
                                        "no_tokens", "no_tokens_capacity",
                                        "after_reset"]:
                for i, row in enumerate(o.get(name, [])):
                    print("rank %d %s step %d: %s" % (r, name, i, {
                        k: round(v, 6) for k, v in row.items()}))

    def check(self, name):
        for r, o in enumerate(self.out):
            self.assertIn(name, o, "rank %d did not finish %s" % (r, name))
            self.assertEqual(self.ep_train.within_budget(o[name]), [],
                             "rank %d %s" % (r, name))

    def test_random_routing_with_dropped_slots(self):
        self.check("random")

    def test_rank_that_receives_nothing(self):
        self.check("all_to_rank0")
        # The other ranks' experts saw no token: their gradients are zeros.
        for o in self.out[1:]:
            self.assertEqual(o["all_to_rank0"][0]["w2"], 0.0)

    def test_chunks_give_the_bits_of_one_chunk(self):
        for r, o in enumerate(self.out):
            self.assertEqual(o.get("chunks_exact"), 0.0, "rank %d" % r)
            self.assertEqual(o.get("chunks_capacity"), 0.0, "rank %d" % r)
        self.check("chunks_train")

    def test_rank_that_sends_nothing(self):
        self.check("rank1_drops_all")

    def test_fixed_capacity_with_room_for_every_copy(self):
        self.check("capacity_fits")
        # No copy dropped: the same bits as the exact dispatch.
        for o in self.out:
            self.assertEqual(o["capacity_fits"][0]["out_max_abs"], 0.0)

    def test_fixed_capacity_drops_like_the_reference(self):
        # The single-GPU layer drops the same copies (-1 slots).
        self.check("capacity_drops")

    def test_fixed_capacity_replays_in_a_cuda_graph(self):
        for r, o in enumerate(self.out):
            self.assertEqual(o.get("graph_worst"), 0.0, "rank %d" % r)

    def test_rank_without_tokens(self):
        self.check("no_tokens")
        self.check("no_tokens_capacity")

    def test_bad_routing_raises_on_both_ranks_then_recovers(self):
        for r, o in enumerate(self.out):
            self.assertIsNotNone(o.get("error"), "rank %d did not raise" % r)
            self.assertIn("rank 1", o["error"])
            self.assertIn("outside [-1, num_experts)", o["error"])
        self.check("after_reset")


if __name__ == "__main__":
    unittest.main()
