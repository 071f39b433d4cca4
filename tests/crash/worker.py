"""The crash-test worker: runs (or continues) one run, and may kill itself.

Usage::

    python -m tests.crash.worker LOG_URL RUN_ID DURABILITY DEDUP_URL GEN \
        [--resume-with recover|start] [--kill-seq N --kill-when before|after]

It prints ``READY`` once its runtime is open, so the test can SIGKILL it at
a random moment after that. With ``--kill-seq N`` it SIGKILLs itself when a
batch holding seq >= N is appended: ``before`` the append (the batch is lost,
as if the process died with it in flight) or ``after`` it (durable, but
nothing after it happened). Every side effect and every step execution is
reported to the dedup service, a separate process with its own SQLite file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Coroutine, Sequence
from pathlib import Path
from typing import Any

import structlog

from agentlog.errors import LeaseExpiredError, LeaseHeldError
from agentlog.eventlog._base import EventLog, RunInfo, Snapshot
from agentlog.eventlog._urls import open_log
from agentlog.eventlog.events import Event, RunStatus, utcnow
from agentlog.projector import load_state
from agentlog.runtime import RetryPolicy, Runtime, RuntimeConfig, StepContext, Workflow, end, goto

#: Each backend's writer lease in the crash workers, in seconds. A worker stops
#: before its next side effect once its lease has run out by its own clock
#: (counted from before its claim was sent, renewed from when each renewal was
#: sent), so the lease must outlast the slowest claim plus the first batch, and
#: a renewal interval (a third of it) plus the slowest renewal. After each kill
#: the next worker waits out the dead one's lease, so it is kept short. A Kafka
#: claim (a transactional producer's init, which fences, plus the tail read)
#: measured 20 ms median, 150 ms at most over 93 claims in a crash-suite run on
#: 2 loaded cores; a renewal (one transaction) 15 ms median, 70 ms at most.
#: A PostgreSQL claim or renewal is one statement, but the worker's first one
#: waits for its pool's first connection (a SCRAM handshake). A Redis claim or
#: renewal is one script call, fsynced (appendfsync always) like an SQLite commit.
LEASE_SECONDS = {"sqlite": 0.3, "kafka": 1.0, "postgresql": 0.5, "redis": 0.5}


def lease_for(log_url: str) -> float:
    """The crash workers' writer lease on the backend of ``log_url``."""
    return LEASE_SECONDS[log_url.split(":", 1)[0]]


#: Exit code of a worker that stopped itself because its lease ran out.
LEASE_LOST = 75
EFFECT_LATENCY = 0.02
ROUNDS = 3
BRANCHES = "abcd"
APPROVAL = {"approved": True}


def child_env() -> dict[str, str]:
    """The environment of a worker process: this checkout's code first on its path."""
    repo = Path(__file__).resolve().parents[2]
    paths = [str(repo / "src"), str(repo), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def spawn_ready(args: Sequence[str], log: Path) -> subprocess.Popen[str]:
    """Start ``python ARGS`` from the repo root with this checkout's code, its
    stderr in ``log``, and return once it printed READY (a hang is bounded by
    the calling test's timeout)."""
    with log.open("w") as stderr:  # the child keeps its own copy
        proc = subprocess.Popen(
            [sys.executable, *args],
            cwd=Path(__file__).resolve().parents[2],
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    assert proc.stdout is not None
    ready = proc.stdout.readline().strip()
    assert ready == "READY", log.read_text()[-4000:]
    return proc


def kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL ``proc`` (if it still runs) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    if proc.stdout is not None:
        proc.stdout.close()


def _post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def crash_workflow(run_id: str, dedup: str, gen: int) -> Workflow:
    """plan -> 4 parallel searches (one fails its first try) -> merge -> 3 refine
    rounds -> approval interrupt -> send."""
    wf = Workflow(
        "crash-agent",
        state={
            "topic": "replace",
            "notes": "append",
            "rounds": "append",
            "draft": "replace",
            "approved": "replace",
            "sent": "replace",
        },
        retry=RetryPolicy(max_attempts=3, initial_interval=0.005),
    )

    def effect(kind: str, arg: str, idempotency_key: str) -> str:
        began = time.time()  # the writer's last check passed just before this call
        body = {"run": run_id, "gen": gen, "key": idempotency_key, "kind": kind, "arg": arg}
        body["began"] = began
        result = str(_post(f"{dedup}/effect", body)["result"])
        time.sleep(EFFECT_LATENCY)  # a model or an API takes a while to answer
        return result

    def report(ctx: StepContext) -> None:
        body = {
            "run": run_id,
            "gen": gen,
            "step": ctx.step,
            "superstep": ctx.superstep,
            "branch": ctx.branch,
            "attempt": ctx.attempt,
        }
        _post(f"{dedup}/step", body)

    @wf.step
    async def plan(ctx: StepContext) -> Any:
        report(ctx)
        text = await ctx.task("llm", effect, "plan", ctx.state["topic"])
        return goto(*[f"search_{b}" for b in BRANCHES], notes=[text])

    for index, which in enumerate(BRANCHES):

        async def search(ctx: StepContext, which: str = which, index: int = index) -> Any:
            report(ctx)
            first = await ctx.task("search", effect, "search", f"{which}1")
            await asyncio.sleep(0.01 * index)
            if which == "b" and ctx.attempt == 1:
                raise RuntimeError("search_b flakes on its first try")
            second = await ctx.task("search", effect, "search", f"{which}2")
            return {"notes": [first, second]}

        wf.step(name=f"search_{which}", then="merge")(search)

    @wf.step
    async def merge(ctx: StepContext) -> Any:
        report(ctx)
        return goto("refine", draft=" ".join(sorted(ctx.state["notes"])))

    @wf.step
    async def refine(ctx: StepContext) -> Any:
        report(ctx)
        done = len(ctx.state.get("rounds", []))
        better = await ctx.task("llm", effect, "refine", f"{done}:{len(ctx.state['draft'])}")
        nxt = "refine" if done + 1 < ROUNDS else "approve"
        return goto(nxt, rounds=[better], draft=ctx.state["draft"] + "+")

    @wf.step(then="send")
    async def approve(ctx: StepContext) -> Any:
        report(ctx)
        answer = ctx.interrupt({"draft": ctx.state["draft"]}, expects={"approved": "bool"})
        return {"approved": answer["approved"]}

    @wf.step
    async def send(ctx: StepContext) -> Any:
        report(ctx)
        receipt = await ctx.task("email", effect, "email", ctx.state["draft"][-12:])
        return end(sent=receipt)

    return wf


class KillSwitchLog(EventLog):
    """Delegates to a real log, and SIGKILLs this process at a chosen seq."""

    def __init__(self, inner: EventLog, kill_seq: int | None, when: str) -> None:
        self.inner, self.kill_seq, self.when = inner, kill_seq, when
        self.url = inner.url
        #: The slowest claim and lease renewal, in seconds: what a lease must outlast.
        self.slowest = {"claim": 0.0, "renew": 0.0}

    def _took(self, what: str, since: float) -> None:
        took = time.monotonic() - since
        self.slowest[what] = max(self.slowest[what], took)

    def _maybe_die(self, events: Sequence[Event], when: str) -> None:
        if self.kill_seq is not None and self.when == when and events[-1].seq >= self.kill_seq:
            os.kill(os.getpid(), signal.SIGKILL)

    async def append(self, events: Sequence[Event], *, durable: bool = True) -> None:
        self._maybe_die(events, "before")
        await self.inner.append(events, durable=durable)
        self._maybe_die(events, "after")

    def read(
        self, run_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> AsyncIterator[Event]:
        return self.inner.read(run_id, after_seq=after_seq, upto_seq=upto_seq)

    async def find_run(self, run_id: str) -> RunInfo | None:
        return await self.inner.find_run(run_id)

    async def list_runs(self, *, status: str | None = None) -> list[RunInfo]:
        return await self.inner.list_runs(status=status)

    async def claim_writer(
        self,
        run_id: str,
        *,
        owner: str = "",
        lease_seconds: float | None = None,
        force: bool = True,
    ) -> int:
        since = time.monotonic()
        epoch = await self.inner.claim_writer(
            run_id, owner=owner, lease_seconds=lease_seconds, force=force
        )
        self._took("claim", since)
        return epoch

    async def renew_lease(self, run_id: str, epoch: int, lease_seconds: float) -> None:
        since = time.monotonic()
        await self.inner.renew_lease(run_id, epoch, lease_seconds)
        self._took("renew", since)

    async def release_lease(self, run_id: str, epoch: int) -> None:
        await self.inner.release_lease(run_id, epoch)

    async def save_snapshot(self, snapshot: Snapshot) -> None:
        await self.inner.save_snapshot(snapshot)

    async def load_snapshot(
        self, run_id: str, *, at_or_before: int | None = None
    ) -> Snapshot | None:
        return await self.inner.load_snapshot(run_id, at_or_before=at_or_before)

    async def prune(self, run_id: str, *, keep_latest_snapshot: bool = False) -> None:
        await self.inner.prune(run_id, keep_latest_snapshot=keep_latest_snapshot)

    async def prune_many(
        self, run_ids: Sequence[str], *, keep_latest_snapshot: bool = False
    ) -> None:
        await self.inner.prune_many(run_ids, keep_latest_snapshot=keep_latest_snapshot)

    async def close(self) -> None:
        await self.inner.close()


async def _wait_for_lease(log: EventLog, run_id: str) -> None:
    """Until the dead writer's lease has run out (bounded by the caller's timeout)."""
    while True:
        info = await log.find_run(run_id)
        if info is None or info.lease_expires_at is None or info.lease_expires_at <= utcnow():
            return
        await asyncio.sleep(0.02)


async def drive(args: argparse.Namespace) -> None:
    log = KillSwitchLog(await open_log(args.log_url), args.kill_seq, args.kill_when)
    wf = crash_workflow(args.run_id, args.dedup, args.gen)
    # "recover" checks the manual verb, so no background worker may take the
    # run first; "start" runs with the worker, as a real process would.
    config = RuntimeConfig(
        owner=f"gen-{args.gen}:{os.getpid()}",
        lease_seconds=args.lease_seconds,
        worker=args.resume_with != "recover",
    )
    try:
        async with log, Runtime(log, workflows=[wf], config=config) as rt:
            await _drive_run(args, log, wf, rt)
    except LeaseExpiredError:
        slowest = ", ".join(f"{k} {v:.3f}s" for k, v in log.slowest.items())
        print(f"LEASE LOST (lease {args.lease_seconds}s; slowest {slowest})", file=sys.stderr)
        raise


async def _drive_run(args: argparse.Namespace, log: EventLog, wf: Workflow, rt: Runtime) -> None:
    """Start or continue the run, answer its approval, and print its final report."""
    print("READY", flush=True)
    info = await log.find_run(args.run_id)
    if info is None or info.last_seq == 0:
        await _wait_for_lease(log, args.run_id)  # a process that died starting it
        await rt.start(
            wf, run_id=args.run_id, input={"topic": "durability"}, durability=args.durability
        )
    else:
        await _wait_for_lease(log, args.run_id)
        state = await load_state(log, args.run_id)
        if state.status == RunStatus.RUNNING:
            if args.resume_with == "recover":
                assert (await rt.recover()).recovered == [args.run_id]
            else:
                await rt.start(wf, run_id=args.run_id)
    print("RUNNING", flush=True)
    while True:
        state = await rt.wait(args.run_id)
        if state.status != RunStatus.WAITING:
            break
        while True:
            try:
                await rt.resume(args.run_id, APPROVAL)
                break
            except LeaseHeldError:  # the parking process died before releasing
                await _wait_for_lease(log, args.run_id)
    print(json.dumps({"status": state.status, "values": state.values}), flush=True)


async def _guarded(work: Coroutine[Any, Any, None], seconds: float) -> None:
    """Run ``work``; if it has not ended after ``seconds``, print where every
    task of this process waits (to stderr, which the test shows) and fail."""
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait([task], timeout=seconds)
    if task in done:
        return task.result()
    print(f"HUNG: not done after {seconds:.0f}s; the tasks of this process:", file=sys.stderr)
    for each in asyncio.all_tasks():
        if each is not asyncio.current_task():
            each.print_stack(file=sys.stderr)
    task.cancel()
    raise TimeoutError(f"the worker did not finish within {seconds:.0f}s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("log_url")
    parser.add_argument("run_id")
    parser.add_argument("durability")
    parser.add_argument("dedup")
    parser.add_argument("gen", type=int)
    parser.add_argument("--resume-with", default="recover", choices=["recover", "start"])
    parser.add_argument("--kill-seq", type=int, default=None)
    parser.add_argument("--kill-when", default="after", choices=["before", "after"])
    parser.add_argument("--lease-seconds", type=float, default=None)
    args = parser.parse_args()
    if args.lease_seconds is None:
        args.lease_seconds = lease_for(args.log_url)
    # stdout carries READY and the final report only; logs go to stderr
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    try:
        asyncio.run(_guarded(drive(args), 180))  # hang guard
    except LeaseExpiredError:
        # This process was too slow (a loaded machine) to renew its short
        # lease, and stopped before its next side effect, as a zombie must:
        # like a kill, the next generation takes the run over.
        sys.exit(LEASE_LOST)


if __name__ == "__main__":
    sys.exit(main())
