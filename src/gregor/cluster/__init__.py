"""Cluster metadata: topics, partitions, leaders, epochs. A local file for one node; etcd later."""
