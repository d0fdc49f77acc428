"""What the group, transaction and share coordinators share: the seam to the runtime.

``outbox`` (typed request tokens, the outbox of writes, replies and other effects),
``timers`` (named deadlines), ``append_errors`` (the one mapping of a failed append to the
error a coordinator's client understands), ``partitioning`` (Kafka's key -> partition rule)
and ``events`` (structured log lines).
"""
