"""The projector: folds a run's events into its RunState.

``fold`` is the one place events become state; snapshots make loading a long
run cost only its tail; ``load_state(..., at_seq=n)`` is time travel; and
``diff_states`` says what changed between two points.
"""

from agentlog.projector.diff import Change, diff_states
from agentlog.projector.fold import apply, apply_writes, fold
from agentlog.projector.reducers import (
    REDUCERS,
    Reducer,
    append,
    merge,
    reducer_name,
    register_reducer,
    replace,
)
from agentlog.projector.snapshots import (
    SNAPSHOT_FORMAT,
    SnapshotPolicy,
    decode_state,
    encode_state,
    load_state,
    save_state,
)
from agentlog.projector.state import RunState, interrupt_key

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
