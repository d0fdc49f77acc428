"""Partitions and their replicas (Kafka's ``kafka.cluster.Partition`` and ``ReplicaManager``):
the one path to a log, the follower fetcher, AlterPartition from the leader, fetch sessions,
and the partitions read as table sources."""
