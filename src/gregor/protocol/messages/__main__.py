"""``python -m gregor.protocol.messages``: the APIs, version counts per API, and totals."""

from gregor.protocol.messages import counts

print(counts())
