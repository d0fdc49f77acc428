"""Options the two command lines of the main job share (``python -m gregor.pipelines`` and
``gregor pipeline run``): their help texts and ``--rows``, so both mean the same."""

from __future__ import annotations

OUTPUT_DIR_HELP = (
    "Parquet output, Spark checkpoint and the started broker's data. A new or empty directory, or "
    "one an earlier run made (it holds a .gregor-pipeline file): a new run replaces only the job's "
    "own windows/, checkpoint/ and broker/ in it. Any other directory is refused; nothing the job "
    "did not make is ever deleted."
)
KEEP_HELP = (
    "Keep the previous run's windows, checkpoint and broker data instead of starting afresh."
)
ROWS_HELP = "Result rows to print: a number (0: no table) or 'all'."
VALUE_FORMAT_HELP = (
    "How the page views are written: avro (the default: Confluent-framed Avro, the schema in a "
    "schema registry, read by Spark as typed columns) or json."
)
AVRO_NEEDS_REGISTRY = (
    "the page views are Avro through a schema registry by default: give the cluster's "
    "registry with --schema-registry URL, or use --value-format json"
)
SCHEMA_REGISTRY_HELP = (
    "The schema registry for avro: by default the started broker serves one; with "
    "--bootstrap-servers give that cluster's registry."
)


def parse_rows(text: str | int) -> int | None:
    """``--rows``: a count (0: print no table) or ``all`` (None: every row)."""
    if isinstance(text, int):
        value = text
    elif str(text).strip().lower() == "all":
        return None
    else:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number of rows or 'all'") from None
    if value < 0:
        raise ValueError(f"{text!r}: give 0 (no table), a positive number or 'all'")
    return value


def rows_arg(text: str) -> int | None:
    import argparse

    try:
        return parse_rows(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
