"""What scripts/torch_suite.py accepts, each with its reason."""

# Tests of the gloo-gated mode that can fail only because the backend is
# not gloo: they check its name where the suite's binding cannot give it.
NAME_CHECKS = {
    # torch's C++ names every out-of-tree backend's group "custom", and the
    # suite compares DDP's logged name with dist.get_backend() ("gloo").
    "test_ddp_logging_data_cpu": "DDP's logged backend name is 'custom' for any out-of-tree backend",
}

# Tests plugin mode skips although gloo runs them, that do not pass in the
# gloo-gated mode either: test -> why. (Skips for the backend's name whose
# tests pass in gloo-gated mode need no entry: the driver checks them.)
PLUGIN_SKIPS = {
}

# CI's subset (under a minute in each mode at 2 ranks): each kind of
# operation, and the semantics the suite checks gloo for.
CI_TESTS = [
    "test_all_reduce_sum_async",
    "test_all_reduce_coalesced_sum",
    "test_all_gather_coalesced_simple",
    "test_all_gather_object_subgroup",
    "test_scatter_complex",
    "test_reduce_sum",
    "test_send_recv_with_tag",
    "test_batch_isend_irecv_gloo_tags",
    "test_monitored_barrier_gloo",
    "test_barrier_timeout_full_group",
    "test_sparse_all_reduce_sum",
    "test_DistributedDataParallelCPU",
    "test_accumulate_gradients_no_sync_allreduce_hook",
]
