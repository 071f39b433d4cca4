"""The DDL of the views of :mod:`agentlog.archive._sql` over the ``events`` view.

``runs``, ``interrupts``, ``checkpoints`` and ``checkpoint_writes`` are
folded out of ``events`` by SQL alone; :data:`VIEW_DDL` creates them in
order. ``tasks`` reads the archive's small tasks tables instead
(:mod:`agentlog.archive._tasks_table`). The columns are described in :mod:`agentlog.archive._sql`.
"""

from __future__ import annotations

__all__ = ["VIEWS", "VIEW_DDL"]

#: The view names, in the order ``--help`` lists them.
VIEWS = ("events", "runs", "tasks", "interrupts", "checkpoints", "checkpoint_writes")

_STATUS_CASE = """CASE type
    WHEN 'RunStarted' THEN 'running' WHEN 'InterruptRaised' THEN 'waiting'
    WHEN 'ResumeReceived' THEN 'running' WHEN 'RunCompleted' THEN 'completed'
    WHEN 'RunFailed' THEN 'failed' WHEN 'RunCancelled' THEN 'cancelled'
    WHEN 'RunShredded' THEN 'shredded' END"""

_RUNS = f"""
CREATE VIEW runs AS
SELECT run_id,
       max(workflow) AS workflow,
       max(version) AS version,
       coalesce(arg_max({_STATUS_CASE}, seq) FILTER (WHERE type IN ('RunStarted',
           'InterruptRaised', 'ResumeReceived', 'RunCompleted', 'RunFailed',
           'RunCancelled', 'RunShredded')), 'running') AS status,
       count(*) FILTER (WHERE type = 'StepCompleted') AS steps,
       count(*) AS events,
       min(ts) AS started,
       max(ts) FILTER (WHERE type IN ('RunCompleted', 'RunFailed', 'RunCancelled')) AS ended,
       date_diff('microsecond', min(ts), max(ts) FILTER (WHERE type IN ('RunCompleted',
           'RunFailed', 'RunCancelled'))) / 1e6 AS duration,
       arg_max(payload_json ->> 'error', seq) FILTER (WHERE type = 'RunFailed') AS error
FROM events GROUP BY run_id
"""

_INTERRUPTS = """
CREATE VIEW interrupts AS
WITH raised AS (
    SELECT run_id, seq, ts, step, payload_json -> '$.payload' AS asked
    FROM events WHERE type = 'InterruptRaised'
), resumed AS (
    SELECT run_id, seq, ts, payload_json -> '$.value' AS answer
    FROM events WHERE type = 'ResumeReceived'
)
SELECT r.run_id, r.seq, r.step, r.asked, r.ts AS raised_at,
       a.answer, a.ts AS answered_at, date_diff('microsecond', r.ts, a.ts) / 1e6 AS waited
FROM raised r ASOF LEFT JOIN resumed a ON r.run_id = a.run_id AND r.seq < a.seq
"""

# A checkpoint counts as removed once a later CheckpointsRemoved names it, or
# the whole thread. Values stay opaque here: they are the serializer's bytes.
_CHECKPOINTS = """
CREATE VIEW checkpoints AS
WITH saved AS (
    SELECT run_id AS thread_id, seq, ts, payload_json ->> 'ns' AS ns,
           payload_json ->> 'checkpoint_id' AS checkpoint_id,
           payload_json ->> 'parent_id' AS parent_id,
           TRY_CAST(payload_json -> '$.metadata' ->> 'step' AS BIGINT) AS step,
           payload_json -> '$.metadata' ->> 'source' AS source,
           CAST(json_transform(payload_json -> '$.values', '["JSON"]') AS JSON[]) AS changed,
           octet_length(payload) AS bytes
    FROM events WHERE type = 'CheckpointSaved'
), removals AS (
    SELECT run_id AS thread_id, seq, payload_json -> '$.checkpoints' AS listed,
           coalesce(TRY_CAST(payload_json ->> 'everything' AS BOOLEAN), false) AS everything
    FROM events WHERE type = 'CheckpointsRemoved'
)
SELECT s.thread_id, s.ns, s.checkpoint_id, s.parent_id, s.seq, s.ts, s.step, s.source,
       list_transform(s.changed, x -> json_extract_string(x, '$[0]')) AS channels, s.bytes,
       EXISTS (SELECT 1 FROM removals r WHERE r.thread_id = s.thread_id AND r.seq > s.seq
               AND (r.everything OR json_contains(r.listed, json_array(s.ns, s.checkpoint_id))))
           AS removed
FROM saved s
"""

_CHECKPOINT_WRITES = """
CREATE VIEW checkpoint_writes AS
WITH saved AS (
    SELECT run_id AS thread_id, seq, ts, payload_json ->> 'ns' AS ns,
           payload_json ->> 'checkpoint_id' AS checkpoint_id,
           payload_json ->> 'task_id' AS task_id, payload_json ->> 'task_path' AS task_path,
           unnest(CAST(json_transform(payload_json -> '$.writes', '["JSON"]') AS JSON[])) AS w
    FROM events WHERE type = 'WritesSaved'
)
SELECT thread_id, ns, checkpoint_id, task_id, task_path, w ->> 0 AS channel,
       TRY_CAST(w ->> 1 AS BIGINT) AS idx, w ->> 2 AS value_type, seq, ts
FROM saved
"""

#: The statements that create every view but ``events`` and ``tasks``
#: (:func:`agentlog.archive._tasks_table.tasks_ddl`), in order.
VIEW_DDL = (_RUNS, _INTERRUPTS, _CHECKPOINTS, _CHECKPOINT_WRITES)
