"""Requests from this broker to its peers: the per-broker connections, the transaction
coordinator's markers and verification, and the channel to the active controller."""
