"""Cluster metadata: topics, partitions, leaders, epochs. A local file for one node; etcd for a cluster.

- ``image``: the immutable ``MetadataImage`` handlers read, and ``MetadataDelta``.
- ``changes``: every metadata change as a pure function of the image (validation, errors);
  ``access_changes`` the credentials, ACLs, quotas and delegation tokens; ``change_base``
  the next image they all return.
- ``codec``: the durable form of an image (JSON), shared by the file and etcd stores.
- ``store``: the ``MetadataStore`` interface and ``open_metadata_store`` (``metadata.store``).
- ``local_store``, ``memory_store``, ``file_store``: the two stores of one process.
- ``etcd_url``, ``etcd_store``: the store of a cluster, in etcd (the ``cluster`` extra).
"""
