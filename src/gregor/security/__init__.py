"""Transport security and authentication, sans-IO: TLS contexts from Kafka's ``ssl.*``
settings, principals from certificates (``ssl.principal.mapping.rules``), JAAS option parsing
and the SASL mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); ACL bindings and filters
(``acls``) and the ACL authorizer (``authorizer``).

Nothing here touches sockets or the event loop: the broker's connection feeds the tokens a
client sends into a mechanism's server object and writes back what it answers. This package
imports only the standard library and ``gregor.protocol``.
"""
