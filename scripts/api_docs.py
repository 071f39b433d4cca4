"""Build the API reference (pdoc) and fail on any warning: ``make docs``.

``python scripts/api_docs.py [OUTPUT_DIR]`` (default ``site/api``) writes
one HTML page per public module, landing on ``index.html`` -> ``agentlog.html``,
whose text (the ``agentlog`` package docstring) starts from ``Runtime`` and
``Workflow`` and links every public module. Any warning pdoc raises (a
module that does not import, an annotation it cannot read, a repeated module)
is printed and the exit code is 1, so a broken page never ships quietly.
``tests/project/test_api_reference.py`` runs this file and walks the links.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

#: The documented modules: the package (whose ``__all__`` brings in ``errors``)
#: and every public subpackage. The
#: ``agentlog`` command (``cli``), the web debugger (``ui``) and the demo
#: agent (``demo``) are programs, documented in docs/guide/cli.md and docs/ui.md.
MODULES = [
    "agentlog",
    "agentlog.runtime",
    "agentlog.eventlog",
    "agentlog.projector",
    "agentlog.archive",
    "agentlog.replay",
    "agentlog.langgraph",
    "agentlog.pydantic_ai",
    "agentlog.openai_agents",
    "agentlog.otel",
    "agentlog.crypto",
    "agentlog.testing",
]

#: Subpackages of ``agentlog`` that are programs, not APIs, and get no page.
NOT_DOCUMENTED = {"cli", "ui", "demo"}


def build(output: Path) -> list[str]:
    """Write the reference into ``output``; return pdoc's warnings, as text."""
    import pdoc
    import pdoc.render

    pdoc.render.configure(docformat="google")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*MODULES, output_directory=output)
    return [f"{w.category.__name__}: {w.message}" for w in caught]


def main(argv: list[str]) -> int:
    """Build into ``argv[0]`` (or ``site/api``); 1 if pdoc warned."""
    output = Path(argv[0] if argv else "site/api")
    found = build(output)
    for line in found:
        print(f"warning: {line}", file=sys.stderr)
    if found:
        print(f"{len(found)} warning(s): the API reference must build clean", file=sys.stderr)
        return 1
    print(f"API reference: {output / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
