"""The controller (Kafka's ``kafka.controller``): election of leaders and ISR changes in the
metadata store, the controller's APIs, their propagation to brokers and a broker's answers to
them, broker liveness, and feature levels."""
