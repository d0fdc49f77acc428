"""Typed columns: Confluent-framed keys and values (Avro, JSON Schema, Protobuf) decoded into
Arrow columns a batch at a time, with the schemas from a schema registry.

Below the broker and the Spark source, both of which decode with it: the Spark data source's
``valueFormat``/``keyFormat`` columns (``gregor.spark`` adds their Spark types) and the typed
Iceberg tables a broker writes (``gregor.tables``). It imports only the client (its schema
registry client) and needs no pyspark.

The modules:

* ``framing``: Confluent's wire framing (magic byte, schema id), the rows grouped by writer
  id, malformed records failed or made null, bad rows found by halving;
* ``avro_schema``, ``json_schema``, ``protobuf_schema``: each format's schemas parsed and
  mapped to the Arrow type of the column they decode into (Avro's resolution too);
* ``avro_columns``, ``json_columns``, ``protobuf_columns``: each format's decoder.
"""
