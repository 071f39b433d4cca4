"""The Redis log's key layout and its Lua scripts.

Every key starts with the log's prefix ``P`` (``agentlog`` by default):

* ``P:events:RUN`` is a stream: one entry per event, with the **explicit
  entry id** ``SEQ-0``. The id is the seq, so a range of seqs is an XRANGE
  of ids, XREAD BLOCK from ``SEQ-0`` wakes a tail at the next event, and the
  stream itself refuses an id at or below its top: a second line of defence
  under the index check (as ``UNIQUE(run_id, seq)`` is in SQLite). Fields:
  ``t`` type, ``ts`` microseconds since 1970 UTC, ``v`` schema_v, ``e``
  writer epoch, ``p`` the stored payload
  (:func:`~agentlog.eventlog.codec.encode_stored_payload`) and ``c`` its
  :func:`~agentlog.eventlog.codec.row_checksum`, verified on every read.
* ``P:run:RUN`` is a hash: the run index row (:class:`RunInfo`'s fields by
  name; times in microseconds; a missing field is None) and the writer claim.
* ``P:runs`` (every run with an event) and ``P:status:STATUS`` are sets, and
  ``P:wake`` (waiting runs with a timer) a sorted set by due time. They
  answer list_runs, runnable and next_wake without reading every run. Plain
  sets, not sorted by update time, because adding a member that is there
  already is no write: a steady append writes only its events and its row
  (list_runs sorts the rows it reads anyway).
* ``P:order`` and ``P:order:STATUS`` are sorted sets of the runs with an
  event, all and per status, scored by ``-updated_at`` (microseconds), so
  that ascending order is the run list's (newest update first, then run id:
  members of one score sort by their bytes). They page
  :meth:`~agentlog.eventlog._reader.EventReader.page_runs` in the server: a
  page is one ZRANGEBYSCORE with LIMIT, and the counts by status are the
  sizes of the per-status sets (ZCOUNT over a time range). The append
  script keeps them. A log written before they existed has no
  ``P:order-built``: the first page_runs builds them from the run hashes
  (:data:`BUILD_ORDER`, atomic per chunk of runs, so an append meanwhile is
  never undone) and then sets it. Delete ``P:order-built`` to rebuild them
  (after a process of an older agentlog appended to the log).
* ``P:qwait:q:QUEUE`` and ``P:qwait:w:WORKFLOW`` are sorted sets of the
  ``queued`` runs of a queue and of a workflow (a run is in its workflow's
  and, with a queue, its queue's), ranked as every backend ranks a queue:
  the score is the priority, the member ``STARTED:RUN`` (``started_at`` in
  microseconds, zero-padded to 20 digits, then the run id), so members of
  one score sort oldest first, then by run id. ``P:qheld:q:QUEUE`` and
  ``P:qheld:w:WORKFLOW`` hold the ``queued`` or ``running`` runs with a
  lease, scored by the lease's end. A queue's admission reads the first
  entries of its waiting sets and the live range of its held sets
  (:data:`READ_QUEUE`), not the backlog. The append script keeps them as a
  run's status, queue or rank change; the claim and lease scripts keep the
  held sets' scores. A log written before they existed has no
  ``P:queues-built``, which the read script checks: the read that finds
  none checks every entry of the sets against its run's hash
  (:data:`CHECK_QUEUE_SET`), puts every ``queued`` and ``running`` run in
  (:data:`BUILD_QUEUES`), each atomic per chunk, and then sets it. Delete
  it to have them put right after a process of an older agentlog (which
  keeps no sets) wrote to the log. Priorities beyond 2**53 in size share a
  score (a double); the reader ranks what it reads exactly.
* ``P:snaps:RUN`` is a hash of the run's snapshots by seq (msgpack of
  ``[created_us, base_seq, state]``), and ``P:snapidx:RUN`` a sorted set of
  ``"SEQ:BASE"`` by seq, so retention (:func:`snapshots_kept_from`) reads
  the small members, never the states.

A script runs atomically, so the checks and the writes of an append, a claim
or a prune are one step that no other client interleaves. Redis does not roll
a script back when it fails midway, so each script checks everything before
its first write. The rules themselves (the next run index row, the retention
floor, which error a refusal deserves) stay in Python, written once for every
backend; the scripts only check and apply what Python computed. The checks of
a claim, of a lease change and of an append's epoch and seq are the one
exception that must run in the script, so their branches are generated from
the tables of :mod:`~agentlog.eventlog._claim_cases`, which Python reads too.
"""

from __future__ import annotations

from agentlog.eventlog._claim_cases import (
    CLAIM_CASES,
    LEASE_CASES,
    grant,
    lua_append_refusals,
    lua_refusals,
)

__all__ = [
    "APPEND",
    "BUILD_ORDER",
    "BUILD_QUEUES",
    "CHECK_QUEUE_SET",
    "CLAIM",
    "LEASE",
    "LOAD_SNAPSHOT",
    "PRUNE",
    "READ_QUEUE",
    "SAVE_SNAPSHOT",
    "TRIM_SNAPSHOTS",
    "Keys",
]


class Keys:
    """The key names of one log (one prefix)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.runs = f"{prefix}:runs"
        self.wake = f"{prefix}:wake"
        self.order = f"{prefix}:order"
        self.order_built = f"{prefix}:order-built"
        self.queues_built = f"{prefix}:queues-built"

    def run(self, run_id: str) -> str:
        return f"{self.prefix}:run:{run_id}"

    def events(self, run_id: str) -> str:
        return f"{self.prefix}:events:{run_id}"

    def status(self, status: str) -> str:
        return f"{self.prefix}:status:{status}"

    def order_in(self, status: str) -> str:
        return f"{self.order}:{status}"

    def queue_sets(self, kind: str, queue: str, workflows: list[str]) -> list[str]:
        """A queue's ``held`` or ``wait`` sets: its own, then its workflows'
        (as :data:`_QUEUE_SETS` names them)."""
        own = f"{self.prefix}:q{kind}:q:{queue}"
        return [own, *(f"{self.prefix}:q{kind}:w:{name}" for name in workflows)]

    def snaps(self, run_id: str) -> str:
        return f"{self.prefix}:snaps:{run_id}"

    def snapidx(self, run_id: str) -> str:
        return f"{self.prefix}:snapidx:{run_id}"


# The queue sets a run's row puts it in (see the module docstring), and its
# member in a waiting set. Keys.queue_sets names the same sets for a reader.
_QUEUE_SETS = """
local function queue_sets(prefix, kind, status, queue, workflow)
  if status ~= 'queued' and (kind == 'wait' or status ~= 'running') then return {} end
  local sets = {prefix .. ':q' .. kind .. ':w:' .. (workflow or '')}
  if queue and queue ~= '' then table.insert(sets, prefix .. ':q' .. kind .. ':q:' .. queue) end
  return sets
end
local function rank_member(started, run_id)
  started = started or ''
  return string.rep('0', 20 - #started) .. started .. ':' .. run_id
end
local function held_sets(prefix, h_status, h_queue, h_workflow, run_id, expiry)
  for _, key in ipairs(queue_sets(prefix, 'held', h_status, h_queue, h_workflow)) do
    if expiry == '' or not expiry then redis.call('ZREM', key, run_id)
    else redis.call('ZADD', key, expiry, run_id) end
  end
end
"""

# KEYS: run hash, stream, runs set, old status set, new status set, wake zset,
#       order zset, old status order zset, new status order zset
# ARGV: run_id, epoch, first seq, n, the last seq the row was computed from,
#       then the next row: workflow, version, status, last_seq, steps,
#       started_at, updated_at, wake_at ('' = none), queue, priority,
#       admitted_at ('' = none), the key prefix, then per event:
#       seq, type, ts, schema_v, payload, checksum
# The queue sets change only when the run's status, queue, workflow or rank does.
# Returns {'ok'}, {'refused', last_seq, writer_epoch} (a fence or a conflict,
# by the checks generated from APPEND_CHECKS, or a row that moved since it was
# read) or {'corrupt', top seq}.
_REFUSED = "{'refused', row_last, tonumber(row_epoch)}"
APPEND = (
    _QUEUE_SETS
    + f"""
local h = redis.call('HMGET', KEYS[1], 'last_seq', 'writer_epoch', 'wake_at', 'status', 'queue',
  'workflow', 'started_at', 'priority', 'lease_expires_at')
local row_last, row_epoch = tonumber(h[1] or '0'), h[2] or '0'
local epoch, first, n = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
{lua_append_refusals(_REFUSED)}
if row_last ~= tonumber(ARGV[5]) then return {_REFUSED} end
"""
    + """for i = 0, n - 1 do
  local a = 18 + i * 6
  -- Only the first XADD can fail (an id at or below the stream's top, so the
  -- index lost seqs the stream has); it fails before anything is written.
  local added = redis.pcall('XADD', KEYS[2], ARGV[a] .. '-0', 't', ARGV[a + 1],
    'ts', ARGV[a + 2], 'v', ARGV[a + 3], 'e', ARGV[2], 'p', ARGV[a + 4], 'c', ARGV[a + 5])
  if type(added) == 'table' and added.err then
    local top = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)[1]
    return {'corrupt', top and string.match(top[1], '^(%d+)') or '0'}
  end
end
local row = {'run_id', ARGV[1], 'workflow', ARGV[6], 'version', ARGV[7], 'status', ARGV[8],
  'last_seq', ARGV[9], 'steps', ARGV[10], 'updated_at', ARGV[12]}
if ARGV[11] ~= '' then table.insert(row, 'started_at'); table.insert(row, ARGV[11]) end
if ARGV[14] ~= '' then
  table.insert(row, 'queue'); table.insert(row, ARGV[14])
  table.insert(row, 'priority'); table.insert(row, ARGV[15])
end
if ARGV[16] ~= '' then table.insert(row, 'admitted_at'); table.insert(row, ARGV[16]) end
if ARGV[13] ~= '' then
  table.insert(row, 'wake_at'); table.insert(row, ARGV[13])
  redis.call('ZADD', KEYS[6], ARGV[13], ARGV[1])
elseif h[3] then
  redis.call('HDEL', KEYS[1], 'wake_at')
  redis.call('ZREM', KEYS[6], ARGV[1])
end
redis.call('HSET', KEYS[1], unpack(row))
redis.call('SADD', KEYS[3], ARGV[1])
if KEYS[4] ~= KEYS[5] then redis.call('SREM', KEYS[4], ARGV[1]) end
redis.call('SADD', KEYS[5], ARGV[1])
local score = '-' .. ARGV[12]
redis.call('ZADD', KEYS[7], score, ARGV[1])
if KEYS[8] ~= KEYS[9] then redis.call('ZREM', KEYS[8], ARGV[1]) end
redis.call('ZADD', KEYS[9], score, ARGV[1])
local id, prefix = ARGV[1], ARGV[17]
local was = table.concat(queue_sets(prefix, 'held', h[4], h[5], h[6]), '\\n')
if was ~= table.concat(queue_sets(prefix, 'held', ARGV[8], ARGV[14], ARGV[6]), '\\n') then
  held_sets(prefix, h[4], h[5], h[6], id, '')
  held_sets(prefix, ARGV[8], ARGV[14], ARGV[6], id, h[9])
end
local old_wait = queue_sets(prefix, 'wait', h[4], h[5], h[6])
local new_wait = queue_sets(prefix, 'wait', ARGV[8], ARGV[14], ARGV[6])
local old_member, new_member = rank_member(h[7], id), rank_member(ARGV[11], id)
local old_score = h[8] or '0'
if table.concat(old_wait, '\\n') .. old_member .. ' ' .. old_score
    ~= table.concat(new_wait, '\\n') .. new_member .. ' ' .. ARGV[15] then
  for _, key in ipairs(old_wait) do redis.call('ZREM', key, old_member) end
  for _, key in ipairs(new_wait) do redis.call('ZADD', key, ARGV[15], new_member) end
end
return {'ok'}
"""
)

# KEYS: order zset.  ARGV: the run hashes' key prefix (``P:run:``), then run ids.
# Puts each run with an event into the order sets as its hash says now.
BUILD_ORDER = """
for i = 2, #ARGV do
  local id = ARGV[i]
  local h = redis.call('HMGET', ARGV[1] .. id, 'last_seq', 'status', 'updated_at')
  if h[1] and tonumber(h[1]) > 0 and h[3] then
    local score = '-' .. h[3]
    redis.call('ZADD', KEYS[1], score, id)
    redis.call('ZADD', KEYS[1] .. ':' .. (h[2] or 'running'), score, id)
  end
end
return 0
"""

# KEYS: none.  ARGV: the key prefix, then run ids. Puts each run into the queue
# sets as its hash says now (a log written before they existed).
BUILD_QUEUES = (
    _QUEUE_SETS
    + """
local prefix = ARGV[1]
for i = 2, #ARGV do
  local id = ARGV[i]
  local h = redis.call('HMGET', prefix .. ':run:' .. id, 'last_seq', 'status', 'queue',
    'workflow', 'started_at', 'priority', 'lease_expires_at')
  if h[1] and tonumber(h[1]) > 0 then
    if h[7] then held_sets(prefix, h[2], h[3], h[4], id, h[7]) end
    for _, key in ipairs(queue_sets(prefix, 'wait', h[2], h[3], h[4])) do
      redis.call('ZADD', key, h[6] or '0', rank_member(h[5], id))
    end
  end
end
return 0
"""
)

# KEYS: one queue set.  ARGV: the key prefix, 'wait' or 'held', then members.
# Keeps each member only as the run's hash says now (its status, queue,
# workflow, rank; a held run's lease end as its score): what an older agentlog
# changed without the sets is put right, and nothing an append or a claim put
# there meanwhile is lost.
CHECK_QUEUE_SET = (
    _QUEUE_SETS
    + """
local prefix, kind = ARGV[1], ARGV[2]
for i = 3, #ARGV do
  local member = ARGV[i]
  local id = member
  if kind == 'wait' then id = string.sub(member, 22) end
  local h = redis.call('HMGET', prefix .. ':run:' .. id, 'last_seq', 'status', 'queue',
    'workflow', 'started_at', 'priority', 'lease_expires_at')
  local keep = false
  if h[1] and tonumber(h[1]) > 0 then
    for _, key in ipairs(queue_sets(prefix, kind, h[2], h[3], h[4])) do
      if key == KEYS[1] then keep = true end
    end
  end
  if kind == 'wait' and keep and member == rank_member(h[5], id) then
    redis.call('ZADD', KEYS[1], h[6] or '0', member)
  elseif kind == 'held' and keep and h[7] then
    redis.call('ZADD', KEYS[1], h[7], member)
  else
    redis.call('ZREM', KEYS[1], member)
  end
end
return 0
"""
)

# KEYS: a queue's held sets, then as many waiting sets.  ARGV: the run hashes'
# key prefix (``P:run:``), now (microseconds), how many waiting runs are wanted,
# the ``queues-built`` key. Returns {holders, waiting}: the hashes (HGETALL) of
# the runs of the held sets whose lease ends after now, and of the first
# ``wanted + #holders`` runs of each waiting set (the held ones among them are
# the reader's to skip), each run once; or {} if the sets are not built. One
# atomic read: the backlog behind them is never read.
READ_QUEUE = """
if redis.call('EXISTS', ARGV[4]) == 0 then return {} end
local n, seen = #KEYS / 2, {}
local function rows(ids)
  local found = {}
  for _, id in ipairs(ids) do
    if not seen[id] then
      seen[id] = true
      table.insert(found, {id, redis.call('HGETALL', ARGV[1] .. id)})
    end
  end
  return found
end
local held = {}
for i = 1, n do
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[i], '(' .. ARGV[2], '+inf')) do
    table.insert(held, id)
  end
end
local holders = rows(held)
local wanted = tonumber(ARGV[3]) + #holders
local waiting = {}
if wanted > 0 then
  for i = n + 1, 2 * n do
    for _, member in ipairs(redis.call('ZRANGE', KEYS[i], 0, wanted - 1)) do
      table.insert(waiting, string.sub(member, 22))
    end
  end
end
return {holders, rows(waiting)}
"""

# KEYS: run hash.  ARGV: run_id, owner, lease expiry ('' = none), force (1/0), now,
# the key prefix. Returns {'ok', epoch} or {'held', owner, expiry}. The refusals
# and the epoch step come from CLAIM_CASES.
CLAIM = (
    _QUEUE_SETS
    + f"""
local h = redis.call('HMGET', KEYS[1], 'writer_epoch', 'lease_owner', 'lease_expires_at',
  'status', 'queue', 'workflow')
local row_epoch, row_owner, row_expiry = h[1], h[2], h[3]
local force, now = ARGV[4] == '1', tonumber(ARGV[5])
{lua_refusals(CLAIM_CASES)}
local epoch = tonumber(row_epoch or '0') + {grant(CLAIM_CASES).epoch_step}
redis.call('HSET', KEYS[1], 'run_id', ARGV[1], 'writer_epoch', tostring(epoch),
  'lease_owner', ARGV[2])
if ARGV[3] == '' then redis.call('HDEL', KEYS[1], 'lease_expires_at')
else redis.call('HSET', KEYS[1], 'lease_expires_at', ARGV[3]) end
held_sets(ARGV[6], h[4], h[5], h[6], ARGV[1], ARGV[3])
return {{'ok', epoch}}
"""
)

# KEYS: run hash.  ARGV: epoch, lease expiry ('' = release), the key prefix, run_id.
# Returns {'ok'}, {'unknown'} or {'refused', writer_epoch}. The refusals come
# from LEASE_CASES, whose grant keeps the epoch.
LEASE = (
    _QUEUE_SETS
    + f"""
local h = redis.call('HMGET', KEYS[1], 'writer_epoch', 'status', 'queue', 'workflow')
local row_epoch = h[1]
local epoch = tonumber(ARGV[1])
{lua_refusals(LEASE_CASES)}
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], 'lease_expires_at')
else redis.call('HSET', KEYS[1], 'lease_expires_at', ARGV[2]) end
held_sets(ARGV[3], h[2], h[3], h[4], ARGV[4], ARGV[2])
return {{'ok'}}
"""
)

# Delete the snapshots below seq FLOOR of index KEYS[I] and hash KEYS[I + 1].
_TRIM = """
local function trim(idx, snaps, floor)
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', idx, '-inf', '(' .. floor)) do
    redis.call('HDEL', snaps, string.match(member, '^(%d+)'))
  end
  redis.call('ZREMRANGEBYSCORE', idx, '-inf', '(' .. floor)
end
"""

# KEYS: snapidx, snaps.  ARGV: seq, base_seq, blob.
# Stores (replacing the same seq) and returns every member, for the floor.
SAVE_SNAPSHOT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[1] .. ':' .. ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return redis.call('ZRANGE', KEYS[1], 0, -1)
"""

# KEYS: snapidx, snaps.  ARGV: floor, the newest member it was computed from.
# Trims only if no newer snapshot came meanwhile (that save trims for itself).
TRIM_SNAPSHOTS = (
    _TRIM
    + """
local top = redis.call('ZREVRANGE', KEYS[1], 0, 0)[1]
if top == ARGV[2] then trim(KEYS[1], KEYS[2], ARGV[1]) end
return 0
"""
)

# KEYS: snapidx, snaps.  ARGV: upper bound seq.  Returns {member, blob} or {}.
LOAD_SNAPSHOT = """
local member = redis.call('ZREVRANGEBYSCORE', KEYS[1], ARGV[1], '-inf', 'LIMIT', 0, 1)[1]
if not member then return {} end
return {member, redis.call('HGET', KEYS[2], string.match(member, '^(%d+)'))}
"""

# KEYS: run hash, stream, snapidx, snaps, the run's two mailbox keys.  ARGV:
# floor ('' = drop every snapshot), the newest member it was computed from,
# then the statuses of an ended run: an ended run's mailbox goes in the same
# script (an unfinished run's stays for its next writer).
# Returns 0 (unknown run), 1 (pruned) or 2 (a snapshot came meanwhile: retry).
PRUNE = (
    _TRIM
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] == '' then
  redis.call('DEL', KEYS[3], KEYS[4])
else
  if redis.call('ZREVRANGE', KEYS[3], 0, 0)[1] ~= ARGV[2] then return 2 end
  trim(KEYS[3], KEYS[4], ARGV[1])
end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'archived', '1')
local status = redis.call('HGET', KEYS[1], 'status')
for i = 3, #ARGV do
  if status == ARGV[i] then redis.call('DEL', KEYS[5], KEYS[6]) end
end
return 1
"""
)
