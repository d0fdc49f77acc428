"""The broker's side of the coordinators (``gregor.coordinator``): the runtime that pumps their
outboxes into the internal topics (``coordinator_runtime``), the typed services the handlers
call (``group_service``, ``txn_service``, ``share_service``), share-partition state
(``share_partitions``, ``shares``), group configs and the producer id manager."""
