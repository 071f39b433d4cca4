"""The test tree cannot hide the standard library from a child process.

A child started with its working directory in ``tests/`` (or with ``tests/``
on its path) imports ``tests/<name>`` in place of a standard module of that
name: a folder ``tests/typing`` once broke every ``from typing import ...``
in the LangGraph crash children. No folder of tests/ takes such a name.
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_test_folder_is_named_like_a_standard_module() -> None:
    folders = {path.name for path in TESTS.iterdir() if path.is_dir()}
    assert folders, "the walk found no folder"
    assert "typing" in sys.stdlib_module_names  # the rule can see the name that once broke
    assert sorted(folders & set(sys.stdlib_module_names)) == []
