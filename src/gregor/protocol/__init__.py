"""Kafka wire protocol, sans-IO: bytes in, messages out. Nothing here touches sockets or files."""
