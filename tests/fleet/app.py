"""The fleet tests' workflows, loaded by ``agentlog worker --app tests.fleet.app:workflows``.

Every side effect POSTs to the dedup service (tests/crash/dedup_server.py, a
separate process whose URL is in ``FLEET_DEDUP``) with its idempotency key,
and some steps report that they began (``/step``), so the tests can count
what really ran in which worker process (``gen`` is the worker's pid).

* ``fleet``: plan -> three parallel branches (an effect, a durable sleep,
  another effect) -> an approval interrupt that the test answers from its
  own process, or that times out after ``input["patience"]`` seconds (not
  approved) -> send (an effect).
* ``nap``: an effect, a durable sleep of ``input["seconds"]``, then the step
  ``wake`` (reported once per execution) with one more effect.
* ``sleeper``: a durable sleep of ``input["seconds"]`` and an end; no service.
* ``slow``: three steps in a row, each reported and each calling an effect
  that takes ``SLOW_EFFECT_S`` (the first one waits on a gate file), so that
  a worker is stopped mid-step.
* ``inbox``: takes a message on topic "jobs" per superstep (``ctx.recv``)
  until it holds ``input["want"]`` of them; no service.
* ``family``: starts three ``kid`` child runs (``ctx.start_child``) and
  waits for their results; each ``kid`` calls an effect (reported, so the
  test sees which worker drove it) that takes ``KID_EFFECT_S``.
* ``bulletin``: publishes its stage (``ctx.publish``), calls an effect that
  waits after its delivery until the file named in ``BULLETIN_GATE`` exists
  (if that is set), then publishes its stage and result.
* ``patchy``: one task on the old path; in :data:`patched` (the same
  workflow, a later deploy) ``ctx.patched("v2")`` picks a new task. Each
  effect waits after its delivery until the file named in ``PATCHY_GATE``
  exists (if that is set).
* ``holder``: starts two ``lingerer`` child runs, which wait on a message
  that never comes, and waits for them; cancelling it cancels them.
* ``orphan`` is in :data:`others` only: a worker started with ``workflows``
  does not know it.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from typing import Any

from agentlog.runtime import StepContext, Workflow, end, goto

__all__ = ["BRANCHES", "SLOW_STEPS", "others", "patched", "workflows"]

#: The parallel branches of one fleet run.
BRANCHES = ("a", "b", "c")
#: How long each fleet branch sleeps (a durable timer).
BRANCH_SLEEP_S = 0.5
#: How long a fleet effect takes after its delivery (a model call's latency),
#: so that a SIGKILL often lands between a delivery and its recorded result.
FLEET_EFFECT_S = 0.3
#: How long one effect of the ``slow`` workflow takes.
SLOW_EFFECT_S = 1.0
#: The steps of the ``slow`` workflow, in order.
SLOW_STEPS = ("one", "two", "three")


def _post(path: str, body: dict[str, Any]) -> Any:
    url = os.environ["FLEET_DEDUP"] + path
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def effect(run: str, kind: str, arg: str, idempotency_key: str) -> str:
    """One delivery to the dedup service; runs in a thread (a sync task)."""
    body = {"run": run, "gen": os.getpid(), "key": idempotency_key, "kind": kind, "arg": arg}
    return str(_post("/effect", body)["result"])


def fleet_effect(run: str, kind: str, arg: str, idempotency_key: str) -> str:
    """An effect that takes :data:`FLEET_EFFECT_S` after it is delivered."""
    result = effect(run, kind, arg, idempotency_key)
    time.sleep(FLEET_EFFECT_S)
    return result


def slow_effect(run: str, kind: str, arg: str, idempotency_key: str) -> str:
    """An effect that takes :data:`SLOW_EFFECT_S` after it is delivered; the
    first step's waits, after its delivery, until the file named in
    ``FLEET_GATE`` exists (if that is set), so a test can stop a worker while
    every run is inside that step."""
    result = effect(run, kind, arg, idempotency_key)
    gate = os.environ.get("FLEET_GATE")
    if gate and arg == SLOW_STEPS[0]:
        deadline = time.monotonic() + 120  # a hang guard
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.02)
    else:
        time.sleep(SLOW_EFFECT_S)
    return result


def report(ctx: StepContext) -> None:
    """Tell the dedup service that this step began, in this process."""
    body = {
        "run": ctx.run_id,
        "gen": os.getpid(),
        "step": ctx.step,
        "superstep": ctx.superstep,
        "branch": ctx.branch,
        "attempt": ctx.attempt,
    }
    _post("/step", body)


# -- fleet: parallel branches, timers, an interrupt, effects --------------------

fleet = Workflow(
    "fleet",
    state={
        "patience": "replace",
        "notes": "append",
        "plan": "replace",
        "approved": "replace",
        "sent": "replace",
    },
)


@fleet.step
async def plan(ctx: StepContext) -> Any:
    text = await ctx.task("llm", fleet_effect, ctx.run_id, "plan", ctx.run_id)
    return goto(*[f"branch_{b}" for b in BRANCHES], plan=text)


def _branch(which: str) -> None:
    async def branch(ctx: StepContext) -> Any:
        first = await ctx.task("fetch", fleet_effect, ctx.run_id, "fetch", f"{which}1")
        await ctx.sleep(BRANCH_SLEEP_S)
        second = await ctx.task("fetch", fleet_effect, ctx.run_id, "fetch", f"{which}2")
        return {"notes": [first, second]}

    fleet.step(name=f"branch_{which}", then="approve")(branch)


for _which in BRANCHES:
    _branch(_which)


@fleet.step(then="send")
async def approve(ctx: StepContext) -> Any:
    # Unanswered within the run's patience, the clock answers: not approved.
    answer = ctx.interrupt(
        {"notes": len(ctx.state["notes"])},
        expects="bool",
        timeout=ctx.state["patience"],
        default=False,
    )
    return {"approved": answer}


@fleet.step
async def send(ctx: StepContext) -> Any:
    receipt = await ctx.task("email", fleet_effect, ctx.run_id, "email", str(ctx.state["approved"]))
    return end(sent=receipt)


# -- nap: a sleep across a worker's death --------------------------------------

nap = Workflow("nap", state={"seconds": "replace", "before": "replace", "after": "replace"})


@nap.step
async def doze(ctx: StepContext) -> Any:
    before = await ctx.task("before", effect, ctx.run_id, "before", "nap")
    await ctx.sleep(ctx.state["seconds"])
    return goto("wake", before=before)


@nap.step
async def wake(ctx: StepContext) -> Any:
    report(ctx)
    after = await ctx.task("after", effect, ctx.run_id, "after", "nap")
    return end(after=after)


# -- sleeper: many pending timers ------------------------------------------------

sleeper = Workflow("sleeper", state={"seconds": "replace", "woke": "replace"})


@sleeper.step
async def lie_down(ctx: StepContext) -> Any:
    await ctx.sleep(ctx.state["seconds"])
    return goto("get_up")


@sleeper.step
async def get_up(ctx: StepContext) -> Any:
    return end(woke=True)


# -- slow: steps that take a while, to stop a worker mid-step -------------------

slow = Workflow("slow", state={"done": "append"})


def _slow_step(name: str, then: str | None) -> None:
    async def body(ctx: StepContext) -> Any:
        report(ctx)
        result = await ctx.task("work", slow_effect, ctx.run_id, "work", name)
        return {"done": [result]} if then is None else goto(then, done=[result])

    slow.step(name=name)(body)


for _index, _name in enumerate(SLOW_STEPS):
    _slow_step(_name, SLOW_STEPS[_index + 1] if _index + 1 < len(SLOW_STEPS) else None)


# -- inbox: messages sent by the test, received one per superstep -------------------

inbox = Workflow("inbox", state={"got": "append", "want": "replace"})


@inbox.step
async def take(ctx: StepContext) -> Any:
    value = await ctx.recv("jobs")
    if len(ctx.state.get("got") or []) + 1 >= ctx.state["want"]:
        return end(got=[value])
    return goto("take", got=[value])


# -- bulletin: values published around a task ----------------------------------


def _gated_effect(run_id: str, idempotency_key: str) -> str:
    result = effect(run_id, "bulletin", "work", idempotency_key)
    gate = os.environ.get("BULLETIN_GATE")
    deadline = time.monotonic() + 120  # a hang guard
    while gate and not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.02)
    return result


bulletin = Workflow("bulletin", state={"done": "replace"})


@bulletin.step
async def announce(ctx: StepContext) -> Any:
    await ctx.publish("stage", "started")
    out = await ctx.task("work", _gated_effect, ctx.run_id)
    await ctx.publish("stage", "worked")
    await ctx.publish("result", out)
    return end(done=out)


# -- patchy: a deploy that patches a step (ctx.patched) ------------------------


def _gated_path(run_id: str, path: str, idempotency_key: str) -> str:
    result = effect(run_id, "patchy", path, idempotency_key)
    gate = os.environ.get("PATCHY_GATE")
    deadline = time.monotonic() + 120  # a hang guard
    while gate and not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.02)
    return result


patchy = Workflow("patchy", state={"path": "replace"})


@patchy.step
async def route(ctx: StepContext) -> Any:
    await ctx.task("old", _gated_path, ctx.run_id, "old")
    return end(path="old")


patchy_v2 = Workflow("patchy", state={"path": "replace"})


@patchy_v2.step(name="route")
async def route_v2(ctx: StepContext) -> Any:
    if ctx.patched("v2"):
        await ctx.task("new", _gated_path, ctx.run_id, "new")
        return end(path="new")
    await ctx.task("old", _gated_path, ctx.run_id, "old")
    return end(path="old")


# -- family: a parent run and its three child runs ----------------------------------

#: How long a kid's effect takes (so a worker is killed while the parent waits).
KID_EFFECT_S = 1.0
kid = Workflow("kid", state={"n": "replace", "out": "replace"})


def _kid_effect(run_id: str, n: int, idempotency_key: str) -> int:
    effect(run_id, "kid", str(n), idempotency_key)
    time.sleep(KID_EFFECT_S)
    return n * 10


@kid.step
async def kid_work(ctx: StepContext) -> Any:
    return end(out=await ctx.task("work", _kid_effect, ctx.run_id, ctx.state["n"]))


family = Workflow("family", state={"outs": "replace"})


@family.step
async def spawn(ctx: StepContext) -> Any:
    handles = [await ctx.start_child(kid, {"n": n}) for n in (1, 2, 3)]
    return end(outs=[(await handle.result())["out"] for handle in handles])


lingerer = Workflow("lingerer", state={"got": "replace"})


@lingerer.step
async def linger(ctx: StepContext) -> Any:
    return end(got=await ctx.recv("never"))  # parks until cancelled


holder = Workflow("holder", state={"outs": "replace"})


@holder.step
async def hold(ctx: StepContext) -> Any:
    handles = [await ctx.start_child(lingerer, {}) for _ in range(2)]
    return end(outs=[await handle.result() for handle in handles])


# -- orphan: a workflow only some workers know ------------------------------------

orphan = Workflow("orphan", state={"done": "replace"})


@orphan.step
async def only_step(ctx: StepContext) -> Any:
    done = await ctx.task("work", effect, ctx.run_id, "orphan", "once")
    return end(done=done)


#: What ``--app tests.fleet.app:workflows`` loads.
workflows = [fleet, nap, sleeper, slow, inbox, bulletin, patchy, family, kid, holder, lingerer]
#: What ``--app tests.fleet.app:patched`` loads: ``patchy`` patched.
patched = [patchy_v2]
#: What ``--app tests.fleet.app:others`` loads.
others = [orphan]
