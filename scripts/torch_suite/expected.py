"""What scripts/torch_suite.py accepts, each with its reason."""

# Tests of the gloo-gated mode that can fail only because the backend is
# not gloo: they check its name or the name its profiling events carry.
NAME_CHECKS = {
}

# Tests plugin mode skips although gloo runs them, that do not pass in the
# gloo-gated mode either: test -> why.
PLUGIN_SKIPS = {
}

# CI's subset (about two minutes in each mode at 2 ranks): a test of each
# kind of operation and of the semantics the suite checks most.
CI_TESTS = [
    "test_all_reduce_sum_async",
    "test_all_gather_coalesced_simple",
    "test_all_to_all",
    "test_barrier_timeout_full_group",
    "test_monitored_barrier_gloo",
    "test_send_recv_with_tag",
    "test_batch_isend_irecv_gloo",
    "test_DistributedDataParallel_SyncBatchNorm_Diff_Input_Sizes_Running_Value",
]
