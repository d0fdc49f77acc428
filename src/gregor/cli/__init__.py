"""Command line: gregor serve | topics | produce | consume | groups."""
