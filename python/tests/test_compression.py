"""Compressed collectives through the fairway package, on CPU processes
(FAIRWAY_TEST_DEVICE=cuda: on the GPU the ranks share)."""
from harness import run_ranks
import rank_compression


def test_compressed_collectives_meet_their_bounds():
    errors = run_ranks(4, rank_compression.compressed_collectives)[0]
    assert errors["all_reduce int8"] > 0, "int8 compression lost nothing: was it compressed?"


def test_error_feedback_converges():
    single, averaged = run_ranks(3, rank_compression.error_feedback_converges)[0]
    assert averaged < 0.1 * single


def test_ddp_int8_hook_with_error_feedback_follows_gloo():
    run_ranks(2, rank_compression.ddp_int8_hook)


def test_bad_input_raises_with_a_message():
    errors = run_ranks(2, rank_compression.compression_bad_input)[0]
    assert "fairway backend" in errors["gloo group"], errors
    assert "not one of" in errors["unknown kind"], errors
    assert "SUM or AVG" in errors["max"], errors
    assert "int32" in errors["int32"], errors
    assert "power of two" in errors["block size"], errors
    assert "residual has 4 elements" in errors["residual size"], errors
