"""The projector: folds a run's events into its RunState.

``fold`` is the one place events become state; snapshots make loading a long
run cost only its tail; ``load_state(..., at_seq=n)`` is time travel; and
``diff_states`` says what changed between two points.
"""

from agentlog.projector._diff import Change, diff_states
from agentlog.projector._fold import apply, apply_writes, fold
from agentlog.projector._reducers import (
    REDUCERS,
    Reducer,
    append,
    merge,
    reducer_name,
    register_reducer,
    replace,
)
from agentlog.projector._snapshots import (
    SNAPSHOT_FORMAT,
    SnapshotPolicy,
    decode_state,
    encode_state,
    load_state,
    save_state,
)
from agentlog.projector._state import RunState, interrupt_key

__all__ = [
    "REDUCERS",
    "SNAPSHOT_FORMAT",
    "Change",
    "Reducer",
    "RunState",
    "SnapshotPolicy",
    "append",
    "apply",
    "apply_writes",
    "decode_state",
    "diff_states",
    "encode_state",
    "fold",
    "interrupt_key",
    "load_state",
    "merge",
    "reducer_name",
    "register_reducer",
    "replace",
    "save_state",
]
