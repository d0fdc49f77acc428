"""The producer: :class:`AIOProducer` and what it is made of.

- ``producer``: :class:`AIOProducer`: configuration, ``send``, ``flush``, transactions;
- ``sender``: the sender task (Produce requests, retries in sequence order, producer ids);
- ``accumulator``: per-partition batching under one lock (``RecordAccumulator``);
- ``_send_py`` / ``_send.pyx``: the per-record path (``send_nowait`` and ``append``), pure
  Python and its compiled twin, chosen at import by ``fast_send``;
- ``futures``: one shared result per batch, one light future per record (``ProduceFuture``);
- ``partitioner``: murmur2 for keys, sticky for null keys, as the Java client;
- ``transaction_manager``: the transactional producer's state and coordinator calls, and
  ``end_transaction`` for a transaction another process began.

The per-record path is written twice (``_send_py.py`` and ``_send.pyx``): a change to what
``send_nowait`` or ``append`` does goes into both, and ``tests/client/test_send_paths.py``
checks that they agree.
"""

from gregor.client.producer.futures import ProduceFuture, RecordMetadata
from gregor.client.producer.partitioner import murmur2, partition_for_key
from gregor.client.producer.producer import AIOProducer, NoTopicMetadataError
from gregor.client.producer.transaction_manager import TransactionHandle, end_transaction

__all__ = [
    "AIOProducer",
    "NoTopicMetadataError",
    "ProduceFuture",
    "RecordMetadata",
    "TransactionHandle",
    "end_transaction",
    "murmur2",
    "partition_for_key",
]
