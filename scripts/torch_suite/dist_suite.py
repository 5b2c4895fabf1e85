"""torch's own DistributedTest suite (what test_distributed_spawn.py runs for
gloo, nccl and ucc), run against Fairway on CPU. Run by
scripts/torch_suite.py, one process per mode and world size:

    FAIRWAY_SUITE_MODE=plugin      BACKEND is "fairway": the suite sees an
                                   out-of-tree backend and gates its tests
                                   by the features declared below.
    FAIRWAY_SUITE_MODE=gloo-gated  BACKEND is "gloo", and the name "gloo" is
                                   bound to Fairway's backend: the suite's
                                   gloo-only CPU tests run on Fairway (only a
                                   check of the backend's name can tell).
    FAIRWAY_SUITE_MODE=gloo        the real gloo, for the baseline counts.

WORLD_SIZE and TEMP_DIR are set by the driver; arguments go to unittest.
"""
import json
import os
import sys
import unittest

MODE = os.environ.get("FAIRWAY_SUITE_MODE", "plugin")
os.environ["BACKEND"] = "fairway" if MODE == "plugin" else "gloo"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

import fairway.torch  # noqa: E402  registers "fairway"

if MODE == "plugin":
    # What the backend implements, in the suite's own vocabulary ("gpu" and
    # "cuda": it takes CUDA tensors too; the tests that need GPUs skip
    # without them, as they do for gloo).
    for feature in ("plugin", "subgroup", "ddp", "gpu", "cuda"):
        DistTestCases.backend_feature[feature].add("fairway")
elif MODE == "gloo-gated":
    dist.Backend._ensure_backend_registered("gloo")
    gloo = dist.Backend._plugins["GLOO"]

    def _fairway_in_place_of_gloo(options, backend_options=None):
        return fairway.torch._create_backend(options, backend_options, name="gloo")

    # dist.get_backend() says "gloo", and the profiler events say
    # "gloo:<operation>", as the suite expects. The group's C++ type is
    # CUSTOM, not GLOO: torch's C++ takes a GLOO-typed backend for its own
    # ProcessGroupGloo and reads gloo's options through it (DDP's logger).
    dist.Backend._plugins["GLOO"] = gloo._replace(creator_fn=_fairway_in_place_of_gloo)
    dist.Backend.backend_type_map["gloo"] = dist.ProcessGroup.BackendType.CUSTOM
elif MODE != "gloo":
    sys.exit(f"dist_suite: FAIRWAY_SUITE_MODE={MODE!r}: expected plugin, gloo-gated or gloo")

from torch.testing._internal import common_utils  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        # Forked, not spawned as test_distributed_spawn.py does: a spawned
        # rank imports torch again (seconds a test on a small machine); the
        # parent has made no group and started no backend to inherit.
        self._start_processes(torch.multiprocessing.get_context("fork").Process)

    @classmethod
    def _run(cls, rank, test_name, file_name, pipe, **kwargs):
        if MODE == "gloo-gated":
            # Every group this rank makes must be Fairway's: a test that ran
            # on the real gloo would prove nothing.
            original = dist.distributed_c10d._new_process_group_helper

            def checked(*args, **kw):
                pg, store = original(*args, **kw)
                if pg is not None and pg is not dist.GroupMember.NON_GROUP_MEMBER:
                    import torch
                    backend = pg._get_backend(torch.device("cpu"))
                    if isinstance(backend, dist.distributed_c10d._ProcessGroupWrapper):
                        backend = backend.wrapped_pg  # TORCH_DISTRIBUTED_DEBUG=DETAIL's checks
                    if not isinstance(backend, fairway.torch.FairwayBackend):
                        raise AssertionError(f"dist_suite: a group got {type(backend).__name__}, not Fairway")
                return pg, store

            dist.distributed_c10d._new_process_group_helper = checked
        super()._run(rank, test_name, file_name, pipe, **kwargs)


class _Recorder(unittest.TextTestResult):
    """Also writes each outcome as a JSON line to FAIRWAY_SUITE_RESULTS:
    the driver reads outcomes from there, not from the interleaved log."""

    def _record(self, test, outcome, detail=""):
        path = os.environ.get("FAIRWAY_SUITE_RESULTS")
        if path:
            with open(path, "a") as out:
                out.write(json.dumps({"test": test.id().rsplit(".", 1)[-1], "outcome": outcome,
                                      "detail": detail[-2000:]}) + "\n")

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "passed", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", "unexpected success")


if __name__ == "__main__":
    common_utils.parse_cmd_line_args()
    unittest.main(argv=common_utils.UNITTEST_ARGS,
                  testRunner=unittest.TextTestRunner(resultclass=_Recorder, verbosity=2))
