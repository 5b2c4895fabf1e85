"""DDP that survives a lost rank and takes a replacement, on CPU ranks.

    python python/examples/ddp_recovery.py --ranks 4 --steps 30

N ranks train a small model with DDP on the fairway backend. One rank is
SIGKILLed at a random step. The survivors catch the error, learn which rank
was lost (fairway.torch.recovery.failed_ranks), shrink the group and go on
training with N - 1 ranks. This script, which plays the job's supervisor,
sees the process die and starts a replacement. At the first step boundary
after it is ready (at three quarters of the run at the latest, when the
survivors wait for it) they let it in: every member gets a reconfigure handle, the
handles meet in the supervisor's store, and torch's reconfigure re-forms
the group with N ranks (survivors first, in order, then the replacement).
The replacement receives the parameters and the step from rank 0, and
training goes on with N ranks to the end.

Each rank writes its final parameters to --out (rank<r>.pt); the script
prints a summary and exits 0 only when every rank finished with N ranks and
the same parameters. FAIRWAY_TIMEOUT_MS bounds how long a silent rank
takes to be found (default here 5000 ms).
"""
import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

STORE_TIMEOUT = timedelta(seconds=60)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


def batch(rank, step):
    """Rank `rank`'s batch at `step`: the same whoever holds the rank."""
    generator = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(8, 16, generator=generator), torch.randn(8, 4, generator=generator)


def log(worker, text):
    print(f"[worker {worker}] {text}", flush=True)


class Trainer:
    """One rank's model, optimizer and place in the group."""

    def __init__(self, worker, store, wrap=True):
        from torch.nn.parallel import DistributedDataParallel as DDP

        self.DDP = DDP
        self.worker = worker
        self.store = store
        torch.manual_seed(0)
        self.module = Mlp()
        self.step = 0
        self.rounds = 0  # reconfigurations this group has been through
        if wrap:  # a replacement wraps once it has the group's state (receive_state)
            self.wrap()

    def wrap(self):
        """DDP and the optimizer over the current group (after any change of it)."""
        self.model = self.DDP(self.module, bucket_cap_mb=0.001)
        self.optimizer = torch.optim.SGD(self.module.parameters(), lr=0.05)

    def train_one_step(self):
        x, y = batch(dist.get_rank(), self.step)
        self.optimizer.zero_grad()
        torch.nn.functional.mse_loss(self.model(x), y).backward()
        self.optimizer.step()

    def survive(self, start):
        """After a failed step: undo its partial update, leave the failed
        ranks out, and redo the step with the survivors."""
        from fairway.torch.recovery import SHRINK_ABORT, failed_ranks, shrink_group

        with torch.no_grad():
            for p, saved in zip(self.module.parameters(), start):
                p.copy_(saved)
        lost = failed_ranks()
        shrink_group(lost, shrink_flags=SHRINK_ABORT)  # the new default group
        log(self.worker, f"lost rank(s) {lost} at step {self.step}: going on with {dist.get_world_size()} ranks")
        self.wrap()

    def admit_replacement_if_ready(self, ranks_wanted, wait):
        """At a step boundary: rank 0 looks for a replacement waiting in the
        store (waits for one, with `wait`), and every rank learns its
        answer by a broadcast."""
        if dist.get_world_size() >= ranks_wanted:
            return
        ready = torch.zeros(1)
        if dist.get_rank() == 0:
            if wait:
                self.store.wait(["joiner/ready"], STORE_TIMEOUT)
            if self.store.check(["joiner/ready"]):
                ready.fill_(1)
                self.store.set("joiner/round", str(self.rounds + 1))
        dist.broadcast(ready, group_src=0)
        if ready.item() == 1:
            self.rounds += 1
            reconfigure(self.store, self.rounds, member=dist.get_rank(), members=dist.get_world_size())
            self.receive_state()

    def receive_state(self):
        """Rank 0's parameters and step, on every rank (the replacement's first state)."""
        step = torch.tensor([self.step], dtype=torch.int64)
        dist.broadcast(step, group_src=0)
        self.step = int(step.item())
        with torch.no_grad():
            for p in self.module.parameters():
                dist.broadcast(p.data, group_src=0)
        self.wrap()
        log(self.worker, f"rank {dist.get_rank()} of {dist.get_world_size()} from step {self.step}")


def reconfigure(store, round_, member, members):
    """Re-forms the default group with the members of `round_`: the current
    ranks 0..members-1 (member: this one's rank, or None for the
    replacement), then the replacement. Handles meet in the store."""
    key = f"round{round_}/handle/" + ("joiner" if member is None else str(member))
    store.set(key, dist._get_reconfigure_handle())
    keys = [f"round{round_}/handle/{r}" for r in range(members)] + [f"round{round_}/handle/joiner"]
    store.wait(keys, STORE_TIMEOUT)
    handles = [store.get(k).decode() for k in keys]
    dist._reconfigure(uuid=round_, handles=handles).wait()


def worker_main(worker, rank, world, host, port, steps, victim, kill_step, out_dir, env):
    os.environ.update(env)
    import fairway.torch  # noqa: F401  registers the backend

    store = dist.TCPStore(host, port, is_master=False, timeout=STORE_TIMEOUT)
    timeout = timedelta(milliseconds=int(os.environ.get("FAIRWAY_TIMEOUT_MS", "5000")))
    joining = rank is None
    if joining:
        # A group with no communicator yet: reconfigure forms it.
        dist.init_process_group("fairway", store=dist.PrefixStore("group", store), rank=0, world_size=1,
                                timeout=timeout, enable_reconfigure=True)
        trainer = None
        store.set("joiner/ready", str(worker))
        store.wait(["joiner/round"], STORE_TIMEOUT)
        round_ = int(store.get("joiner/round").decode())
        members = world - 1
        reconfigure(store, round_, member=None, members=members)
        trainer = Trainer(worker, store, wrap=False)
        trainer.rounds = round_
        trainer.receive_state()
        store.set("joiner/joined_at_step", str(trainer.step))
    else:
        dist.init_process_group("fairway", store=dist.PrefixStore("group", store), rank=rank, world_size=world,
                                timeout=timeout)
        trainer = Trainer(worker, store)
    # The survivors go on short-handed while the replacement starts, and
    # wait for it at step admit_by at the latest, so the last quarter of
    # the run always has every rank.
    admit_by = max(kill_step + 1, 3 * steps // 4)
    while True:
        trainer.admit_replacement_if_ready(world, wait=trainer.step >= admit_by)
        if trainer.step >= steps:
            break
        start = [p.detach().clone() for p in trainer.module.parameters()]
        if worker == victim and trainer.step == kill_step:
            log(worker, f"killed at step {trainer.step}")
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            trainer.train_one_step()
            trainer.step += 1
        except RuntimeError:
            trainer.survive(start)
    params = [p.detach().clone() for p in trainer.module.parameters()]
    torch.save({"params": params, "world": dist.get_world_size(), "rank": dist.get_rank(), "worker": worker},
               os.path.join(out_dir, f"rank{dist.get_rank()}.pt"))
    dist.barrier()
    dist.destroy_process_group()


def run(ranks, steps, kill_step=None, victim=None, seed=None, out_dir=None, limit_s=240, env=None):
    """The supervisor: starts the ranks, replaces the one that dies, and
    returns the summary (raises RuntimeError if any rank failed)."""
    chooser = random.Random(seed)
    victim = chooser.randrange(ranks) if victim is None else victim
    kill_step = chooser.randrange(1, max(2, steps // 2)) if kill_step is None else kill_step
    env = {"FAIRWAY_TIMEOUT_MS": "5000", **(env or {})}
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=STORE_TIMEOUT)
    context = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as scratch:
        out_dir = out_dir or scratch

        def start(worker, rank):
            process = context.Process(target=worker_main, args=(worker, rank, ranks, "127.0.0.1", store.port, steps,
                                                                victim, kill_step, out_dir, env))
            process.start()
            return process

        workers = {w: start(w, w) for w in range(ranks)}
        replaced = False
        deadline = time.monotonic() + limit_s
        while any(p.is_alive() for p in workers.values()) and time.monotonic() < deadline:
            time.sleep(0.05)
            if any(p.exitcode not in (None, 0) and w != victim for w, p in workers.items()):
                break  # a rank failed: the job cannot finish
            if not replaced and workers[victim].exitcode == -signal.SIGKILL:
                replaced = True
                workers[ranks] = start(ranks, None)  # the replacement, a new worker
        for p in workers.values():
            if p.is_alive():
                p.kill()
            p.join()
        failed = {w: p.exitcode for w, p in workers.items() if p.exitcode != 0 and w != victim}
        if failed or not replaced:
            raise RuntimeError(f"workers failed (worker: exit code): {failed}; replacement started: {replaced}")
        finals = [torch.load(os.path.join(out_dir, f"rank{r}.pt")) for r in range(ranks)]
        joined_at = int(store.get("joiner/joined_at_step").decode())
    identical = all(all(torch.equal(a, b) for a, b in zip(finals[0]["params"], f["params"])) for f in finals)
    return {
        "ranks": ranks, "steps": steps, "killed_worker": victim, "kill_step": kill_step,
        "replacement_joined_at_step": joined_at,
        "final_world_sizes": [f["world"] for f in finals],
        "workers_by_final_rank": [f["worker"] for f in finals],
        "identical_parameters": identical,
        "params": [f["params"] for f in finals],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--kill-step", type=int, default=None, help="default: random")
    parser.add_argument("--victim", type=int, default=None, help="the worker killed; default: random")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    summary = run(args.ranks, args.steps, args.kill_step, args.victim, args.seed)
    summary.pop("params")
    print(json.dumps(summary, indent=2))
    ok = summary["identical_parameters"] and all(w == args.ranks for w in summary["final_world_sizes"])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
