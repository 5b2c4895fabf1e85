"""Flight records through torch: a DDP job on the fairway backend where
one rank sleeps before a step past the group's timeout (and is then
killed, so it never makes the step's call). The other ranks dump
Fairway's record (FAIRWAY_TRACE_DIR) and torch's own
(TORCH_FR_DUMP_TEMP_FILE: the backend tells torch's flight-recorder hook
of completions and runs its abort hooks on the failure); fairway-trace
names the sleeper, and torch's analyzer (fr_trace) names it as the rank
whose dump it misses, from either set of dumps. (A sleeper that wakes and calls can
complete the call alone, its peers' inputs being there; torch's analyzer
then blames whichever ranks differ from the first dump it reads, which
depends on the directory's order.)"""
import os
import pickle
import subprocess
import sys
import tempfile

import rank_trace
from harness import run_ranks

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FAIRWAY_TRACE = os.path.join(ROOT, "build", "bin", "fairway-trace")


def test_a_rank_that_sleeps_before_a_ddp_step_is_named_by_fairway_trace_and_fr_trace():
    world, sleeper, sleep_step = 3, 1, 3
    with tempfile.TemporaryDirectory() as directory, tempfile.TemporaryDirectory() as torch_directory:
        env = {"FAIRWAY_TRACE_DIR": directory, "FAIRWAY_TEST_PG_TIMEOUT_S": "2", "FAIRWAY_TEST_NO_TEARDOWN": "1",
               "TORCH_FR_DUMP_TEMP_FILE": os.path.join(torch_directory, "torch_rank_")}
        results = run_ranks(world, rank_trace.ddp_with_a_sleeping_rank, sleeper, sleep_step, 4.0, env=env,
                            expect_exits=(sleeper,), limit_s=90)
        for rank in range(world):
            if rank != sleeper:
                assert results[rank].startswith("failed at step %d" % sleep_step), results[rank]
        dumps = sorted(name for name in os.listdir(directory) if ".fairway_rank" in name)
        assert len(dumps) == world - 1, dumps

        ours = subprocess.run([FAIRWAY_TRACE, directory], capture_output=True, text=True, timeout=60)
        assert ours.returncode == 1, ours.stdout + ours.stderr
        assert ours.stdout.startswith("Culprit: rank %d." % sleeper), ours.stdout

        assert sorted(os.listdir(torch_directory)) == ["torch_rank_%d" % rank for rank in range(world)
                                                       if rank != sleeper]
        # The call rank 0 gave up on carries torch's sequence number in both records.
        with open(os.path.join(torch_directory, "torch_rank_0"), "rb") as dump:
            torch_hung = [e for e in pickle.load(dump)["entries"] if e["state"] != "completed"]
        fairway_dump = next(name for name in dumps if name.endswith(".fairway_rank0"))
        with open(os.path.join(directory, fairway_dump), "rb") as dump:
            fairway_failed = [e for e in pickle.load(dump)["entries"] if e["fairway_state"] == "failed"]
        assert torch_hung and fairway_failed, (torch_hung, fairway_failed)
        assert fairway_failed[0]["fairway_caller_seq"] == torch_hung[0]["collective_seq_id"], \
            (fairway_failed[0], torch_hung[0])
        assert "(caller's #%d)" % torch_hung[0]["collective_seq_id"] in ours.stdout, ours.stdout
        for folder in (directory, torch_directory):
            # The sleeper left no dump: fr_trace says so unless told to analyze what is there.
            theirs = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace",
                                     "--allow-incomplete-ranks", folder], capture_output=True, text=True, timeout=120)
            verdict = "\n".join(line for line in (theirs.stdout + theirs.stderr).splitlines()
                                if "unrecognized comm library" not in line)
            assert theirs.returncode == 0, verdict
            assert "missed FR dumps from ranks ({%d})" % sleeper in verdict, verdict
