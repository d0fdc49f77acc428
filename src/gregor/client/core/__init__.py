"""The client's shared core: what the producer, the consumer and the admin client all stand on.

- ``client``: :class:`~gregor.client.core.client.KafkaClient`, one connection per broker and the
  cluster metadata, refreshed as the roles ask;
- ``conn`` / ``blocking``: one connection to one broker, asyncio or blocking, over the sans-IO
  :mod:`gregor.protocol.connection`, with the ApiVersions negotiation and the SASL login;
- ``metadata``: the client's picture of the cluster (brokers, topics, leaders, KIP-951 hints);
- ``config``: the settings in Kafka's own names, per role;
- ``security`` / ``sasl``: TLS and the SASL mechanisms from those settings;
- ``errors``: the client-side errors beside the protocol's error codes;
- ``loop``: the event loop thread the synchronous clients and bulk readers share;
- ``timespec``: times and durations as Kafka's tools take them.

Nothing here imports a role package (``producer``, ``consumer``, ``admin``) or the facade: the
import contract in ``pyproject.toml`` keeps it so.
"""
