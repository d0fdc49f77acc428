"""Topics as Iceberg tables (issue 39): each led partition of a topic whose ``iceberg.mode``
is not ``disabled`` is translated, committed record by committed record, into the topic's
Iceberg table, exactly once.

The modules, from the bottom:

* ``settings``: the topic and broker settings, and the fail-closed checks (pyiceberg missing);
* ``schema``: the ``key_value`` table (Iceberg schema, hour partitioning) and the conversion of
  fetched record sets to its rows;
* ``typed``: the typed modes (``value_schema_id_prefix``, ``value_schema_latest``): values
  decoded with ``gregor.columns`` into a ``value`` struct, the table's schema evolved, the
  records that do not convert split off;
* ``offsets``: the per-partition offsets every commit records in its snapshot summary;
* ``upsert``: a compacted topic's table as an upsert table (one row per partition and key);
* ``faults``: the crash points the crash tests kill a broker at;
* ``catalog``: pyiceberg's catalog, a topic's table, and the exactly-once commit;
* ``dead_letters``: a typed mode's dead-letter table ``<topic>~dlq``, committed before the
  topic's table, exactly once with it;
* ``translator``: one partition's read/convert/buffer/commit loop;
* ``service``: the broker's set of translators, reconciled with what it leads.

The broker implements ``translator.PartitionSource`` over its partitions
(``gregor.broker.replication.table_topics``) and reconciles the service after every metadata change.
"""
