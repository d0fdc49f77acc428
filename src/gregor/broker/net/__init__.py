"""The network shell (Kafka's ``kafka.network``): listeners and their acceptors, connection
quotas, TLS and SASL on a connection, and the dispatcher that hands each request to its
handler. The only wing above the handlers."""
