"""Gregor's protocol code generator: guide -> spec JSON -> message modules (see generate.py)."""
