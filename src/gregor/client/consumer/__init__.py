"""The consumers: :class:`AIOConsumer`, :class:`AIOShareConsumer` and the bulk readers.

- ``consumer``: :class:`AIOConsumer` (subscribe or assign, poll, seek, commit) and
  ``list_offsets``, ListOffsets per partition leader;
- ``fetcher``: positions (``SubscriptionState``), fetch sessions, prefetching, decoding;
- ``group``: group membership's common part (coordinator, commits, offset fetches, the
  rebalance listener) and the classic protocol's member (JoinGroup/SyncGroup);
- ``group_consumer``: the member of a KIP-848 consumer group (ConsumerGroupHeartbeat);
- ``assignors``: the client-side assignors and the consumer protocol's subscription and
  assignment bytes;
- ``share_consumer``: :class:`AIOShareConsumer`, a member of a KIP-932 share group;
- ``arrow`` / ``bulk``: offset ranges read straight into Arrow record batches, asyncio
  (``fetch_arrow``) or on a blocking connection in the caller's thread (``RangeReader``, the
  Spark data source's reader). They import pyarrow, so this package does not import them.
"""

from gregor.client.consumer.consumer import AIOConsumer
from gregor.client.consumer.fetcher import ConsumerRecord
from gregor.client.consumer.group import ConsumerGroupMetadata, OffsetAndMetadata, RebalanceListener
from gregor.client.consumer.share_consumer import AIOShareConsumer, ShareRecord

__all__ = [
    "AIOConsumer",
    "AIOShareConsumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "OffsetAndMetadata",
    "RebalanceListener",
    "ShareRecord",
]
