"""The web console (``gregor console``): cluster overview, topics, a message browser and
producer, consumer groups with lag and offset resets, live charts, ACLs and users, over Gregor's
client against any Kafka-compatible cluster. See ``console.app``."""
