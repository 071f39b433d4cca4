"""The Kafka backend: events on a real Apache Kafka 4.0.x broker, via aiokafka.

Modules, by role (each imports the others directly, never this package):

* :mod:`~agentlog.eventlog.kafka._config`: :class:`KafkaConfig`;
* :mod:`~agentlog.eventlog.kafka._admin`: creates and checks the topics;
* :mod:`~agentlog.eventlog.kafka._records`: the runs topic's keys and values;
* :mod:`~agentlog.eventlog.kafka._clients`: starting and stopping aiokafka clients;
* :mod:`~agentlog.eventlog.kafka._security`: the SASL and TLS settings of every
  client, and why a listener refused us (``KafkaAuthError``);
* :mod:`~agentlog.eventlog.kafka._reader`: bounded reads of both topics;
* :mod:`~agentlog.eventlog.kafka._txn`: one run's writer and its transactions;
* :mod:`~agentlog.eventlog.kafka._writer_pool`: the run writers of one log (appends,
  claims, leases);
* :mod:`~agentlog.eventlog.kafka._log`: :class:`KafkaEventLog`, which wires
  them together;
* the partitioned layout, for a worker fleet: :mod:`~agentlog.eventlog.kafka._group`
  (membership of a consumer group), :mod:`~agentlog.eventlog.kafka._ownership`
  (one transactional producer per owned partition, group commit),
  :mod:`~agentlog.eventlog.kafka._changes` (a run's tail, a caller's change),
  :mod:`~agentlog.eventlog.kafka._offsets` (the commands an owner finished),
  :mod:`~agentlog.eventlog.kafka._commands` (the commands topic's records and
  the owners' replies), :mod:`~agentlog.eventlog.kafka._replies` (a client
  waits for its reply) and :mod:`~agentlog.eventlog.kafka._grouplog`
  (``PartitionedKafkaEventLog``, which ``KafkaEventLog.connect`` returns for
  partitioned topics: it names its layout where it is defined, and this
  package imports it, so ``log`` never imports it).

Topics of the standalone layout (created by :mod:`~agentlog.eventlog.kafka._admin`;
the partitioned one is described there and in
:mod:`~agentlog.eventlog.kafka._ownership`):

* ``<name>.events``: every event, keyed by run id, ``cleanup.policy=delete``.
  A run's partition is chosen once and recorded in its index entry.
* ``<name>.runs``: compacted; each run's index entry, writer epoch and lease,
  and its latest snapshots, with the events offsets a read starts from (see
  :mod:`~agentlog.eventlog.kafka._records`).

Writing. Each run has one transactional id, ``<name>.writer.<run_id>``. A
writer first calls ``init_transactions`` with it, which fences every older
producer of that run and aborts or completes their open transaction; only
*then* does it read the run's tail (last seq and epoch). From that moment no
one else can commit for the run without fencing this producer first, so the
tail it holds stays true until a commit of its own fails with
ProducerFenced. That is why two racing processes can never both append seq
N: the one fenced last gets ProducerFenced, re-reads the tail, and stops with
FencedError (a newer epoch) or ConflictError (the seq is taken). Events and
the index entry go in one short transaction; readers use ``read_committed``.

Reading is bounded: a read starts at the best known offset at or before the
wanted seq (a snapshot's, the index entry's, or the run's first event) and
reads its partition up to the high watermark, keeping records whose key is
the run id. :attr:`KafkaEventLog.last_read_records` counts what it fetched.
"""

from agentlog.eventlog.kafka._config import KafkaConfig
from agentlog.eventlog.kafka._grouplog import PartitionedKafkaEventLog as _Partitioned
from agentlog.eventlog.kafka._log import KafkaEventLog

# Imported for KafkaEventLog.connect: the partitioned layout's class names itself
# there when it is defined (grouplog.py sits above log.py, which never imports it).
del _Partitioned

__all__ = ["KafkaConfig", "KafkaEventLog"]
