"""Gregor under faults: a Jepsen-style harness and checker for Kafka semantics.

``python -m gregor.chaos --time-limit 300 --nemesis kill,pause,partition,clock --seed 7`` starts
three brokers on a three-member etcd, every link through a Kafka-aware TCP proxy
(``cluster``, ``proxy``), drives them with many clients of four libraries (``workload``,
``worker``, ``clients``) while the nemesis kills, pauses, partitions, holds requests back and
skews clocks (``nemesis``), heals, reads everything back, and checks the history
(``checker``) for every anomaly Kafka's semantics forbid; it prints the anomaly table and the
liveness figures. ``python -m gregor.chaos check history.jsonl`` checks a history again.

``bugs`` holds brokers broken on purpose (one module a bug, patched in at start by
``launch``), to prove the harness catches what it claims to. The harness itself imports nothing
of the broker: it talks to it as clients and operators do.
"""
