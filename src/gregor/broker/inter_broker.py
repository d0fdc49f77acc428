"""Old path of ``gregor.broker.channels``, kept only for the coordinator adapters (remove with them)."""

from gregor.broker.channels.broker_channels import *  # noqa: F403
from gregor.broker.channels.txn_routing import *  # noqa: F403
