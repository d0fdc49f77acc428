"""Metadata writes on behalf of admin requests: topics (create, delete, partitions, configs)."""
