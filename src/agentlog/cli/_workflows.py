"""``--app``: find the user's workflows, as uvicorn and celery find an app.

``--app module:attribute`` imports ``module`` with the current directory on
the import path (no ``PYTHONPATH=.`` needed); ``--app path/to/agents.py:attr``
loads that file, with its folder on the path so its own imports work.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from agentlog.errors import ConfigError
from agentlog.runtime import Workflow

__all__ = ["load_workflows"]

_FORMS = "write --app module:attribute or --app path/to/file.py:attribute"


def load_workflows(specs: list[str] | None) -> list[Workflow[Any, Any]]:
    """The demo's workflow plus every workflow that an ``--app`` value names.

    Raises:
        ConfigError: a value that does not name an importable Workflow (or
            list of them); the message says which and what to write instead.
    """
    from agentlog.cli._demo import demo_workflow

    found: list[Workflow[Any, Any]] = [demo_workflow()]
    for spec in specs or []:
        target = _resolve(spec)
        items = target if isinstance(target, list | tuple) else [target]
        if not items or not all(isinstance(item, Workflow) for item in items):
            raise ConfigError(
                f"--app {spec}: that is a {type(target).__name__}, not a Workflow or a list "
                "of Workflows; point it at the variable that holds your Workflow"
            )
        found.extend(items)
    return found


def _resolve(spec: str) -> Any:
    where, colon, attr = spec.rpartition(":")
    if not colon or not where or not attr:
        raise ConfigError(f"--app {spec}: missing the attribute after ':'; {_FORMS}")
    if where.endswith(".py") or os.sep in where or "/" in where:
        module = _load_file(spec, Path(where))
    else:
        module = _import(spec, where)
    try:
        return getattr(module, attr)
    except AttributeError:
        known = sorted(n for n, v in vars(module).items() if isinstance(v, Workflow | list))
        hint = f"; it defines {', '.join(known)}" if known else ""
        raise ConfigError(f"--app {spec}: {where} has no {attr!r}{hint}") from None


def _import(spec: str, name: str) -> ModuleType:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # as uvicorn and celery do
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and name.startswith(exc.name):
            raise ConfigError(
                f"--app {spec}: no module {name!r} in the current directory ({cwd}) or "
                f"on PYTHONPATH; run agentlog from your project's folder, or {_FORMS}"
            ) from None
        raise _import_failed(spec, exc) from exc
    except Exception as exc:
        raise _import_failed(spec, exc) from exc


def _load_file(spec: str, path: Path) -> ModuleType:
    if not path.is_file():
        raise ConfigError(f"--app {spec}: there is no file {path}; {_FORMS}")
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # so the file's own imports of its neighbours work
    name = path.stem
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise ConfigError(f"--app {spec}: {path} is not a Python file; {_FORMS}")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise _import_failed(spec, exc) from exc
    return module


def _import_failed(spec: str, exc: BaseException) -> ConfigError:
    return ConfigError(
        f"--app {spec}: your code raised {type(exc).__name__} while loading: {exc}; "
        "fix it and run the command again"
    )
