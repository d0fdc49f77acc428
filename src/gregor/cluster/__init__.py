"""Cluster metadata: topics, partitions, leaders, epochs. A local file for one node; etcd later.

- ``image``: the immutable ``MetadataImage`` handlers read, and ``MetadataDelta``.
- ``changes``: every metadata change as a pure function of the image (validation, errors).
- ``store``: the ``MetadataStore`` interface and ``open_metadata_store`` (``metadata.store``).
- ``local_store``, ``memory_store``, ``file_store``: the two stores of one process.
- ``metadata``: the broker's previous, synchronous store (to be removed once unused).
"""
