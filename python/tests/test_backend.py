"""The fairway torch.distributed backend against gloo, on CPU processes
(FAIRWAY_TEST_DEVICE=cuda: fairway's tensors on the GPU the ranks share)."""
import os

import pytest

from harness import DEVICE, run_ranks
import rank_features
import rank_ops
import rank_semantics
import rank_stacks

# On one GPU: one rank (NCCL) and ranks sharing it (UCX).
WORLDS = [2, 3, 4] if DEVICE == "cpu" else [1, 2, 4]


@pytest.mark.parametrize("world", WORLDS)
def test_every_operation_type_and_op_matches_gloo(world):
    results = run_ranks(world, rank_ops.sweep)
    failures = [f for _, rank_failures in results for f in rank_failures]
    checked = sum(count for count, _ in results)
    assert checked > 100 * world
    assert not failures, "\n".join(failures[:20])


def test_async_work_and_futures():
    run_ranks(3, rank_features.async_and_futures)


def test_new_group_and_split_group():
    run_ranks(4, rank_features.subgroups)


@pytest.mark.parametrize("world", [2, 3])
def test_ddp_with_each_hook_matches_gloo(world):
    worst = run_ranks(world, rank_features.ddp_hooks_match_gloo)[0]
    assert set(worst) == {"none", "allreduce_hook", "fp16_compress_hook", "bf16_compress_hook"}


def test_fsdp2_matches_gloo():
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        pytest.skip("this torch has no FSDP2 (torch.distributed.fsdp.fully_shard)")
    run_ranks(2, rank_features.fsdp2_matches_gloo)


def test_killed_peer_makes_every_survivor_raise_within_the_timeout():
    timeout_s = 8
    results = run_ranks(3, rank_features.killed_peer, expect_exits=(2,),
                        env={"FAIRWAY_TEST_PG_TIMEOUT_S": str(timeout_s), "FAIRWAY_TEST_NO_TEARDOWN": "1"},
                        limit_s=60)
    for rank in (0, 1):
        seconds, message = results[rank]
        assert message != "no error", f"rank {rank} did not notice the dead peer"
        assert seconds <= timeout_s + 2, f"rank {rank} raised after {seconds:.1f} s"
        assert "rank 2" in message, message


def test_fp8_dtypes():
    assert run_ranks(3, rank_features.fp8_dtypes)[0] == 8


def test_bad_input_raises_with_a_message():
    errors = run_ranks(2, rank_features.bad_input)[0]
    assert "contiguous" in errors["non-contiguous"]
    assert "not supported" in errors["int16 dtype"]
    assert "elements" in errors["output size"]
    assert "bitwise" in errors["bitwise on float"].lower() or "band" in errors["bitwise on float"].lower(), errors


def test_fairway_and_gloo_calls_in_turn_never_hang():
    run_ranks(4, rank_features.interleaved_with_gloo, limit_s=90)


def test_the_nccl_plugin_uses_the_nccl_torch_loaded():
    import ctypes
    import pathlib

    import torch  # noqa: F401  loads its NCCL where its build has one

    def loaded():
        with open("/proc/self/maps") as maps:
            return sorted({line.split()[-1] for line in maps if "libnccl.so" in line})

    before = loaded()
    if not before:
        pytest.skip("this torch loaded no NCCL")
    build = os.environ.get("FAIRWAY_BUILD_DIR", pathlib.Path(__file__).resolve().parents[2] / "build")
    plugin = pathlib.Path(build) / "lib" / "libfairway-transport-nccl.so"
    if not plugin.exists():
        pytest.skip(f"no NCCL plugin at {plugin} (built only with CUDA and NCCL)")
    ctypes.CDLL(str(plugin))
    assert loaded() == before, "a second libnccl.so.2 was loaded beside torch's"


def test_all_gather_coalesced_matches_gloo():
    run_ranks(2, rank_features.all_gather_coalesced_matches_gloo)


@pytest.mark.parametrize("world", [2, 3])
def test_async_ops_return_before_a_late_peer_arrives(world):
    seconds = run_ranks(world, rank_features.async_ops_return_before_data_moves)[0]
    assert max(seconds.values()) < 0.5, seconds


def test_sequence_numbers_count_collectives_alike_on_every_rank():
    everyone = run_ranks(2, rank_features.sequence_numbers)[0]
    assert len(set(everyone)) == 1, everyone
    first, after = everyone[0]
    assert after == first + 3, everyone


def test_barrier_timeout_says_it_timed_out():
    import re

    results = run_ranks(2, rank_features.barrier_timeout,
                        env={"FAIRWAY_TEST_PG_TIMEOUT_S": "2", "FAIRWAY_TEST_NO_TEARDOWN": "1"}, limit_s=60)
    # torch's own suite matches a barrier timeout against this pattern.
    assert re.search("Timed out|closed|timeout", results[0]), results[0]


@pytest.mark.parametrize("world", [2, 3])
def test_monitored_barrier_names_the_absent_ranks_as_gloo_does(world):
    seen = run_ranks(world, rank_semantics.monitored_barrier, limit_s=90)
    # The same ranks raise on fairway and gloo, each rank with the words gloo uses.
    for rank, backends in enumerate(seen):
        assert backends["fairway"].keys() == backends["gloo"].keys(), (rank, backends)
        for scenario, message in backends["gloo"].items():
            assert (message is None) == (backends["fairway"][scenario] is None), (rank, scenario, backends)


def test_sparse_allreduce_sums_like_gloo():
    run_ranks(3, rank_semantics.sparse_allreduce_matches_gloo)


def test_coalescing_manager_makes_one_call_of_a_group():
    run_ranks(3, rank_semantics.coalescing_manager)


@pytest.mark.parametrize("world", [2, 3])
def test_batch_isend_irecv_matches_gloo(world):
    run_ranks(world, rank_semantics.batch_isend_irecv)


@pytest.mark.parametrize("world", [2, 3])
def test_tags_and_receives_from_any_source_match_gloo(world):
    run_ranks(world, rank_semantics.tags_and_any_source)


def test_list_forms_of_views_match_gloo():
    run_ranks(3, rank_semantics.list_forms_of_views)


def test_object_collectives_on_a_subgroup():
    run_ranks(3, rank_semantics.object_collectives_on_subgroups)


def test_groups_carry_the_backend_name_ddp_logs():
    run_ranks(2, rank_semantics.group_names)


def test_profiler_names_each_call():
    run_ranks(2, rank_semantics.profiler_events)


def test_tensor_parallel_inside_fsdp2_across_on_a_2d_mesh_matches_gloo():
    run_ranks(4, rank_stacks.tensor_parallel_inside_fsdp2_across, limit_s=240)


def test_fsdp2_bf16_mixed_precision_matches_gloo():
    run_ranks(2, rank_stacks.fsdp2_bf16_mixed_precision, limit_s=180)


def test_functional_collectives_eager_and_compiled_match_gloo():
    run_ranks(2, rank_stacks.functional_collectives, limit_s=300)


def test_collective_module_goes_straight_to_the_backend():
    run_ranks(3, rank_features.collective_module_goes_straight_to_the_backend)


def test_mappable_tensors_reduce_alike_and_are_mapped_by_the_peers():
    # Rank results: whether each mapped its peers' memory.
    assert all(run_ranks(2, rank_features.mappable_tensors))
