"""The asyncio admin client: one class assembled from its families of calls.

Each call sends the API to the broker that owns the answer (the controller for topic, ACL,
quota and feature changes, the group coordinator for group calls, the transaction coordinator
for transactions, partition leaders for DeleteRecords, ListOffsets and DescribeProducers, any
broker otherwise) and returns plain Python values (``gregor.client.admin.types``). Per-item
failures come back as exception objects in the result dict rather than raising, so one bad
topic does not hide the others' results (``raise_on_error=True`` raises the first instead).

Where the calls live, one module per family as in franz-go's ``kadm``: ``topics``,
``configs``, ``groups``, ``records``, ``security`` (ACLs, SCRAM, quotas, tokens),
``transactions`` and ``cluster`` (features, elections, reassignments, log directories).
"""

from __future__ import annotations

from gregor.client.admin.cluster import ClusterApi
from gregor.client.admin.configs import ConfigsApi
from gregor.client.admin.groups import GroupsApi
from gregor.client.admin.records import RecordsApi
from gregor.client.admin.security import SecurityApi
from gregor.client.admin.topics import TopicsApi
from gregor.client.admin.transactions import TransactionsApi


class AIOAdminClient(
    TopicsApi, ConfigsApi, GroupsApi, RecordsApi, SecurityApi, TransactionsApi, ClusterApi
):
    """An asyncio Kafka admin client: ``async with AIOAdminClient({...}) as admin: ...``."""


__all__ = ["AIOAdminClient"]
