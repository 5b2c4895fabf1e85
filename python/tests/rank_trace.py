"""Rank function of test_trace.py: DDP on the fairway backend where one
rank sleeps before a step longer than the group's timeout and is then
killed, never having made the step's call; every other rank's failure
writes its flight record to FAIRWAY_TRACE_DIR."""
import os
import signal
import sys
import time

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from ddp_recovery import Mlp, batch  # noqa: E402


def ddp_with_a_sleeping_rank(rank, world, sleeper, sleep_step, sleep_s):
    torch.manual_seed(0)
    module = Mlp()
    model = DDP(module)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.05)
    for step in range(8):
        if rank == sleeper and step == sleep_step:
            time.sleep(sleep_s)  # the others time out meanwhile, and dump
            os.kill(os.getpid(), signal.SIGKILL)
        x, y = batch(rank, step)
        optimizer.zero_grad()
        try:
            torch.nn.functional.mse_loss(model(x), y).backward()
        except RuntimeError as error:
            return "failed at step %d: %s" % (step, str(error)[:200])
        optimizer.step()
    return "no failure"
