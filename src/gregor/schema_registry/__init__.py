"""A Confluent-compatible schema registry that keeps its schemas in a Kafka topic.

Theory of operation. The registry is a Kafka client of any Kafka-compatible cluster: its
schemas, compatibility levels and modes live in the compacted ``_schemas`` topic in
Confluent's record layout (``records``), so a topic written by Confluent Schema Registry or
Karapace is read unchanged and the other way round. At start the store (``store``) reads the
topic from the beginning into ``state``; changes are appended with ``acks=all`` and answered
once read back. ``registry`` holds the rules (ids, versions, compatibility, deletes, modes),
``formats`` the three schema types (Avro, JSON Schema, Protobuf), ``http`` the REST API,
``auth`` its basic auth against the cluster's users, ``acls`` and ``authorization`` the ACL
authorizer (ACLs in the ``_schemas_acl`` topic, each endpoint's operation enforced) and
``server`` the process that ``gregor schema-registry`` runs.

Any number of registries may share a topic: they elect one writer, the only one that
allocates ids, in a Kafka group (``election``), and the others forward writes to it
(``forwarding``), answering reads from their own copy of the topic.
"""
