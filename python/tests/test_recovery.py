"""Surviving a lost rank through torch.distributed: dist.shrink_group on
the fairway backend after a peer is killed, DDP that goes on with the
survivors (checked against a run of the remaining ranks), torch's
reconfigure, and the example in python/examples/ddp_recovery.py, where a
replacement rejoins the survivors."""
import os
import tempfile

import numpy

import rank_recovery  # also puts python/examples on the path
import ddp_recovery
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


def test_a_replacement_joins_through_reconfigure():
    """python/examples/ddp_recovery.py: 3 DDP ranks, one killed at a step the
    seed picks; the survivors shrink and go on, the supervisor starts a
    replacement, and torch's reconfigure brings the group back to 3 ranks.
    Every rank ends with the same parameters."""
    summary = ddp_recovery.run(ranks=3, steps=40, seed=7, limit_s=150)
    assert summary["final_world_sizes"] == [3, 3, 3]
    assert summary["identical_parameters"]
    assert 3 in summary["workers_by_final_rank"]  # the replacement is a member
    assert summary["kill_step"] <= summary["replacement_joined_at_step"] <= 3 * 40 // 4
    for got in summary["params"][1:]:
        for a, b in zip(summary["params"][0], got):
            assert numpy.array_equal(a.numpy(), b.numpy())


def test_reconfigure_forms_and_reforms_a_group():
    results = run_ranks(2, rank_recovery.reconfigure_forms_a_group, env=ENV, limit_s=90)
    for rank in (0, 1):
        outcome = results[rank]
        assert "before reconfigure formed the group" in outcome["before"]
        assert outcome["deferred"] == (0, 1, [5.0, 5.0])
        assert outcome["reversed"] == (1 - rank, 2, [3.0, 3.0])
        assert outcome["set_rank"][0] == outcome["set_rank"][1]
        assert "was used before" in outcome["used uuid"]
        assert "is this process's" in outcome["not mine"]
        assert "not a fairway handle" in outcome["garbage"]
        assert outcome["after"] == [2.0, 2.0, 2.0]
