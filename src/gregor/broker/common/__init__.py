"""What every wing of the broker may use: the error convention, structured events, internal
topic names and the sendfile region of a fetch."""
