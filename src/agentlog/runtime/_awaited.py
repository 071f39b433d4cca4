"""Whether a call's result is about to be awaited: ``await ctx.interrupt(...)``.

``ctx.interrupt`` is a plain function that returns the answer (or parks the
run). Awaiting it is a mistake the type checkers report (the answer's type is
not awaitable), but code that is not type-checked would only fail once the
human has answered, when ``await <answer>`` raises, and after the step's
retries. The caller's bytecode tells at the call: the instruction right after
the call is ``GET_AWAITABLE`` exactly when the result is awaited, so the
mistake is refused before anything is recorded.
"""

from __future__ import annotations

import dis
import functools
import sys
from types import CodeType

__all__ = ["result_is_awaited"]


def result_is_awaited(depth: int = 2) -> bool:
    """Whether the frame ``depth`` levels up awaits the result of the call it is making.

    ``depth`` counts from the caller of this function (1: its caller, 2: the
    caller's caller, the code that called the public function).
    """
    try:
        frame = sys._getframe(depth)
    except ValueError:  # no such frame
        return False
    return _awaits(frame.f_code, frame.f_lasti)


@functools.lru_cache(maxsize=1024)
def _awaits(code: CodeType, offset: int) -> bool:
    """Whether the first instruction after the one at ``offset`` is ``GET_AWAITABLE``."""
    for instruction in dis.get_instructions(code):
        if instruction.offset > offset and instruction.opname not in ("CACHE", "EXTENDED_ARG"):
            return instruction.opname == "GET_AWAITABLE"
    return False
