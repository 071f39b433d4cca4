"""Opening sealed payloads inside ``agentlog sql``, for a user who holds the keys.

Encrypted runs are archived as they are stored (:mod:`agentlog.archive._parquet`):
their ``payload_json`` is the clear metadata plus ``"_sealed": true``. With a
cipher, :func:`install` registers the scalar function ``agentlog_open_payload``
(a vectorized Arrow UDF) and defines the ``events`` view so that a sealed
row's ``payload_json`` is its full JSON, the same rendering a plain run's row
has. Rows this process cannot open (a shredded run, a key store without the
run's key) keep the metadata JSON, so their content reads as NULL and their
metadata (type, seq, ts, task_name...) stays. Without a cipher no function is
registered and every sealed row keeps its metadata JSON.

The function only opens blobs that are bound to the row's run, seq and type,
with keys the user already holds; it reads no file through DuckDB, so the
connection's lock-down (:func:`agentlog.archive._sql._lock_down`) still holds.
Data keys are cached by the cipher's :class:`~agentlog.crypto.DataKeyCache`;
the runs it cannot open are remembered here (a bounded LRU), so a shredded
run of many rows asks the key store once, not once per row.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import duckdb
import pyarrow as pa

from agentlog.archive._parquet import SEALED_MARKER, row_json
from agentlog.crypto import PayloadCipher
from agentlog.eventlog.codec import decode_stored_payload

__all__ = ["OPEN_FUNCTION", "SealedRowOpener", "events_view"]

#: The SQL name of the function that opens a sealed row.
OPEN_FUNCTION = "agentlog_open_payload"

_STORED = "SELECT * FROM _archived_events UNION ALL BY NAME SELECT * FROM _hot_events"

# Only rows marked sealed reach Python: DuckDB evaluates a CASE branch on the
# rows that take it, and a query that never reads payload_json calls nothing.
# The function falls back to the metadata JSON itself: wrapping it in
# coalesce() makes DuckDB 1.5.5 read the Arrow strings it returned after they
# were freed (garbage JSON), which a plain CASE branch does not.
_OPENED = f"""
SELECT * REPLACE (
    CASE WHEN payload_json ->> '{SEALED_MARKER}' = 'true'
         THEN {OPEN_FUNCTION}(run_id, seq, type, schema_v, payload, payload_json)
         ELSE payload_json END AS payload_json)
FROM ({_STORED})
"""


class SealedRowOpener:
    """The ``agentlog_open_payload(run_id, seq, type, schema_v, payload, payload_json)`` function.

    Returns each row's full payload JSON, or its stored (metadata) JSON where
    the run's content cannot be opened here. A tampered blob or a key store
    that does not answer fails the query; the typed error is kept in
    :attr:`error` so the caller can raise it instead of DuckDB's wrapped message.
    """

    def __init__(self, cipher: PayloadCipher, *, max_runs: int = 4096) -> None:
        """Open with ``cipher``; remember up to ``max_runs`` runs it cannot open."""
        self.cipher = cipher
        self.max_runs = max_runs
        #: The error that failed the last query inside the function, if any.
        self.error: Exception | None = None
        self._closed: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(
        self, run_id: Any, seq: Any, kind: Any, schema_v: Any, payload: Any, stored_json: Any
    ) -> pa.Array:
        """One vector of rows (Arrow arrays in, an Arrow string array out)."""
        columns = (run_id, seq, kind, schema_v, payload)
        rows = zip(*(column.to_pylist() for column in columns), strict=True)
        opened = [self.open_row(*row) for row in rows]
        return pa.array(
            [
                json if json is not None else stored
                for json, stored in zip(opened, stored_json.to_pylist(), strict=True)
            ],
            pa.string(),
        )

    def open_row(
        self, run_id: str | None, seq: int | None, kind: str | None, schema_v: int | None, raw: Any
    ) -> str | None:
        """One row's full payload JSON, or None if this process cannot open it.

        Raises:
            TamperedPayloadError, CorruptEventError: the stored bytes are bad.
            KeyStoreUnavailableError: the key store does not answer.
        """
        if run_id is None or seq is None or kind is None or schema_v is None or raw is None:
            return None
        with self._lock:
            if run_id in self._closed:
                return None
        try:
            data, _, unreadable = decode_stored_payload(
                kind, schema_v, raw, self.cipher, run_id=run_id, seq=seq, where="agentlog sql"
            )
        except Exception as exc:
            self.error = exc
            raise
        if unreadable is not None:
            self._remember(run_id)
            return None
        return row_json(data)

    def _remember(self, run_id: str) -> None:
        with self._lock:
            self._closed[run_id] = None
            while len(self._closed) > self.max_runs:
                self._closed.popitem(last=False)


def events_view(conn: Any, cipher: PayloadCipher | None) -> SealedRowOpener | None:
    """Create the ``events`` view on ``conn`` (opening sealed rows with ``cipher``).

    Returns the registered function, or None without a cipher.
    """
    if cipher is None:
        conn.execute(f"CREATE VIEW events AS {_STORED}")
        return None
    opener = SealedRowOpener(cipher)
    types = duckdb.sqltypes
    conn.create_function(
        OPEN_FUNCTION,
        opener,
        [types.VARCHAR, types.BIGINT, types.VARCHAR, types.INTEGER, types.BLOB, types.VARCHAR],
        types.VARCHAR,
        type="arrow",
        null_handling="special",
        side_effects=False,
    )
    conn.execute(f"CREATE VIEW events AS {_OPENED}")
    return opener
