"""The step graph as the code can walk it: what :meth:`Workflow.mermaid` draws.

A step's declaration says only part of where it goes: ``then`` is where a
returned dict (or None) leads, and ``routes``, when given, bounds its
``goto``. Where a ``goto`` leads, and whether the step can end the run, is
in the step's code, so this module reads each step's source (``ast``, never
running it) and follows its ``return`` statements:

* a dict, None or falling off the end follows ``then``, or ends the run;
* ``end(...)`` ends the run;
* ``goto(...)`` leads to the steps it names: a name, a step function, or
  ``Send(step, ...)``, also inside ``*(...)`` of a literal or comprehension;
* anything it cannot name (a target computed at run time, a returned
  variable) leads to any of the step's declared ``routes``, or, with none
  declared, to "any step": the honest answer for an undeclared route.

A step whose source cannot be read (built at run time, no file) is drawn
from its declaration alone, as a step that may do anything it allows.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentlog.errors import InvalidRouteError
from agentlog.runtime._routes import Next, Send, Target, end, goto

__all__ = ["ANY", "END", "Edges", "step_edges", "to_mermaid"]

#: The end node's id (a step may not take this name: it is Mermaid's node here).
END = "__end__"
#: The node for "a step the code picks at run time, with no routes declared".
ANY = "__any__"

_RETURNS_NEXT = {"goto": goto, "end": end, "Next": Next}


class _Step(Protocol):
    """What the graph reads of a registered step (a workflow's ``Step``)."""

    @property
    def name(self) -> str: ...
    @property
    def fn(self) -> Callable[..., Any]: ...
    @property
    def then(self) -> tuple[str, ...]: ...
    @property
    def routes(self) -> tuple[str, ...]: ...


class _Workflow(Protocol):
    """What the graph reads of a workflow: a protocol, so that this module,
    which ``Workflow.mermaid`` calls, never imports the workflow module."""

    @property
    def start(self) -> list[str]: ...
    @property
    def steps(self) -> Mapping[str, _Step]: ...
    def step_name(self, target: Target) -> str: ...


@dataclass
class Edges:
    """Where one step can lead: ``follows`` by its ``then`` edges (or to the
    end with none), ``jumps`` by ``goto``/``end`` (dotted in the chart)."""

    follows: list[str] = field(default_factory=list)
    jumps: list[str] = field(default_factory=list)


@dataclass
class _Outcomes:
    """What a step's returns can do, before the declaration is applied."""

    follows_then: bool = False
    ends: bool = False
    targets: list[str] = field(default_factory=list)
    computed: bool = False  # a goto (or a returned value) this reading cannot name

    def anything(self) -> None:
        self.follows_then = self.ends = self.computed = True


def step_edges(workflow: _Workflow, step: _Step) -> Edges:
    """Every edge ``step`` can take, and none that it cannot."""
    found = _outcomes(workflow, step.fn)
    edges = Edges()
    if found.follows_then:
        edges.follows = list(step.then) or [END]
    allowed = set(step.routes) | set(step.then)
    targets = [t for t in found.targets if t in workflow.steps]
    if step.routes:  # declared routes bound goto at run time: nothing else is taken
        targets = [t for t in targets if t in allowed]
    if found.computed:
        targets += list(step.routes) if step.routes else [ANY]
    if found.ends:
        targets.append(END)
    edges.jumps = [t for t in dict.fromkeys(targets) if t not in edges.follows]
    return edges


def to_mermaid(workflow: _Workflow) -> str:
    """The workflow as a Mermaid flowchart: solid edges where a returned dict
    leads, dotted ones where ``goto`` and ``end`` lead."""
    body = [f"    __start__ --> {name}" for name in workflow.start]
    for step in workflow.steps.values():
        edges = step_edges(workflow, step)
        body += [f"    {step.name} --> {target}" for target in edges.follows]
        body += [f"    {step.name} -.-> {target}" for target in edges.jumps]
    nodes = ["    __start__([start])", f"    {END}([end])"]
    if any(line.endswith(f" {ANY}") for line in body):
        nodes.append(f"    {ANY}[[any step]]")
    return "\n".join(["flowchart TD", *nodes, *body]) + "\n"


def _outcomes(workflow: _Workflow, fn: Callable[..., Any]) -> _Outcomes:
    found = _Outcomes()
    tree = _function_tree(fn)
    if tree is None:
        found.anything()
        return found
    names = _Names(workflow, fn)
    for node in _own_nodes(tree):
        if isinstance(node, ast.Return):
            _read_value(node.value, names, found)
    if _may_fall_off(tree.body):
        found.follows_then = True
    return found


def _function_tree(fn: Callable[..., Any]) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        module = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return None
    first = module.body[0] if module.body else None
    return first if isinstance(first, ast.FunctionDef | ast.AsyncFunctionDef) else None


def _own_nodes(tree: ast.AST) -> Iterable[ast.AST]:
    """The nodes of a function, not of the functions and classes inside it."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        yield child
        yield from _own_nodes(child)


def _may_fall_off(body: list[ast.stmt]) -> bool:
    """Whether running ``body`` can reach its end (then the step returns None)."""
    if not body:
        return True
    last = body[-1]
    if isinstance(last, ast.Return | ast.Raise):
        return False
    if isinstance(last, ast.If):
        return _may_fall_off(last.body) or _may_fall_off(last.orelse)
    if isinstance(last, ast.With | ast.AsyncWith):
        return _may_fall_off(last.body)
    return True


class _Names:
    """Resolves a name in the step's code as Python would: closure, then globals."""

    def __init__(self, workflow: _Workflow, fn: Callable[..., Any]) -> None:
        self.workflow = workflow
        self.scope: dict[str, Any] = dict(getattr(fn, "__globals__", {}))
        with contextlib.suppress(TypeError, ValueError):  # no closure to read
            self.scope.update(inspect.getclosurevars(fn).nonlocals)

    def called(self, call: ast.Call) -> str | None:
        """``goto``, ``end``, ``Next`` or ``Send`` if ``call`` calls one of them."""
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "to":  # Send.to(step, input)
            func = func.value
            return "Send" if isinstance(func, ast.Name) and self.called_name(func) else None
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name is None:
            return None
        known = {**_RETURNS_NEXT, "Send": Send}
        resolved = self.scope.get(name) if isinstance(func, ast.Name) else None
        for label, obj in known.items():
            if resolved is obj or (resolved is None and name == label):
                return label
        return None

    def called_name(self, func: ast.Name) -> bool:
        """Whether ``func`` names :class:`Send` (``Send.to``)."""
        resolved = self.scope.get(func.id)
        return resolved is Send or (resolved is None and func.id == "Send")

    def step(self, node: ast.expr) -> str | None:
        """The step a ``goto`` argument names, or None if it is computed."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            value = self.scope.get(node.id)
            if isinstance(value, str):
                return value
            try:
                return self.workflow.step_name(value) if callable(value) else None
            except InvalidRouteError:  # a function that is not one of its steps
                return None
        if isinstance(node, ast.Call) and self.called(node) == "Send" and node.args:
            return self.step(node.args[0])
        return None


def _read_value(value: ast.expr | None, names: _Names, found: _Outcomes) -> None:
    """Record what returning ``value`` does."""
    called = names.called(value) if isinstance(value, ast.Call) else None
    if _is_writes(value):
        found.follows_then = True
    elif isinstance(value, ast.IfExp):
        _read_value(value.body, names, found)
        _read_value(value.orelse, names, found)
    elif isinstance(value, ast.Call) and called in ("goto", "Next"):
        args = value.args if called == "goto" else _next_targets(value)
        if called == "Next" and not args:
            found.ends = True
        for arg in args:
            _read_target(arg, names, found)
    elif called == "end":
        found.ends = True
    else:  # a variable or a helper's result: a dict, or a Next this reading cannot see
        found.anything()


def _is_writes(value: ast.expr | None) -> bool:
    """Whether ``value`` is plainly writes: None, a dict display or ``dict(...)``."""
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return True
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        return value.func.id == "dict"
    return isinstance(value, ast.Dict | ast.DictComp)


def _next_targets(call: ast.Call) -> list[ast.expr]:
    given = [kw.value for kw in call.keywords if kw.arg == "goto"]
    given += call.args[1:2]
    if not given:
        return []
    if isinstance(given[0], ast.Tuple | ast.List):
        return list(given[0].elts)
    return [ast.Starred(given[0])]


def _read_target(arg: ast.expr, names: _Names, found: _Outcomes) -> None:
    """Record where one ``goto`` argument leads."""
    if isinstance(arg, ast.Starred):
        inner = arg.value
        if isinstance(inner, ast.Tuple | ast.List | ast.Set):
            for item in inner.elts:
                _read_target(item, names, found)
            return
        if isinstance(inner, ast.GeneratorExp | ast.ListComp | ast.SetComp):
            _read_target(inner.elt, names, found)
            return
        found.computed = True
        return
    if isinstance(arg, ast.IfExp):
        _read_target(arg.body, names, found)
        _read_target(arg.orelse, names, found)
        return
    target = names.step(arg)
    if target is None:
        found.computed = True
    else:
        found.targets.append(target)
