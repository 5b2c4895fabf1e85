"""Surviving a lost rank through torch.distributed: dist.shrink_group on
the fairway backend after a peer is killed, and DDP that goes on with the
survivors, checked against a run of the remaining ranks."""
import os
import tempfile

import numpy

import rank_recovery
from harness import run_ranks

ENV = {"FAIRWAY_TEST_PG_TIMEOUT_S": "20", "FAIRWAY_TEST_NO_TEARDOWN": "1", "FAIRWAY_TIMEOUT_MS": "5000"}


def test_shrink_group_after_a_killed_peer():
    results = run_ranks(3, rank_recovery.shrink_after_killed_peer, env=ENV, expect_exits=(2,), limit_s=60)
    for rank in (0, 1):
        new_rank, size, values = results[rank]
        assert (new_rank, size) == (rank, 2)
        assert values == [3.0] * 4  # 1 + 2 over the two survivors


def test_ddp_goes_on_without_a_killed_rank():
    world, victim, kill_step = 3, 1, 5
    with tempfile.TemporaryDirectory() as directory:
        snapshot = os.path.join(directory, "params.pt")
        survivors = run_ranks(world, rank_recovery.ddp_survives_a_killed_rank, victim, kill_step, snapshot, env=ENV,
                              expect_exits=(victim,), limit_s=90)
        reference = run_ranks(world - 1, rank_recovery.ddp_reference_from, victim, kill_step, snapshot, limit_s=60)
    for old_rank, new_rank in ((0, 0), (2, 1)):
        params, size = survivors[old_rank]
        assert size == world - 1
        for got, want in zip(params, reference[new_rank]):
            assert numpy.allclose(got, want, rtol=0, atol=1e-6), abs(got - want).max()
