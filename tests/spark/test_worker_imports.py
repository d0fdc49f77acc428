"""What a Spark Python worker loads to read topics: Spark starts a fresh Python process for
each kind of data source call (lookup, create, plan, read, write, commit, a stream's runner), and
every one imports the source. pandas alone took about half a second of that; the read path does
not need it, so it must not import it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from spark_helpers import Broker, create_topic, produce

_READ = """
import json, sys
from gregor.spark.reader import KafkaInputPartition, read_partition
from gregor.spark.source import GregorDataSource
bootstrap, topic = sys.argv[1], sys.argv[2]
loaded = "pandas" in sys.modules
batches = []
for headers in (False, True):
    part = KafkaInputPartition(topic, 0, 0, 6, {"bootstrap.servers": bootstrap}, headers, 0, True, True, 65536, 30.0)
    batches += [(headers, batch) for batch in read_partition(part)]
read = "pandas" in sys.modules
rows = []
for headers, batch in batches:  # (to_pydict makes datetimes of the timestamps through pandas)
    d = batch.to_pydict()
    rows.append([[o, v.decode(), d["topic"][i], d["partition"][i]] for i, (o, v) in
                 enumerate(zip(d["offset"], d["value"]))])
    if headers:
        rows.append([None if h is None else [[x["key"], x["value"] and x["value"].decode()] for x in h]
                     for h in d["headers"]])
print(json.dumps({"after_import": loaded, "after_read": read, "rows": rows}))
"""


def test_a_worker_reads_without_importing_pandas(gregor: Broker, topic: str) -> None:
    create_topic(gregor, topic, 1)
    produce(gregor, topic, {0: 3})
    produce(gregor, topic, {0: 3}, first={0: 3}, headers=True)
    # Spark sets this variable in its Python workers (gregor.spark then skips Spark Connect)
    env = dict(os.environ, PYTHON_WORKER_FACTORY_SECRET="test")
    r = subprocess.run(
        [sys.executable, "-c", _READ, gregor.bootstrap_servers, topic], env=env, capture_output=True
    )
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    got = json.loads(r.stdout.decode().strip().splitlines()[-1])
    expected = [[i, f"v0-{i}", topic, 0] for i in range(6)]
    # records produced without headers have null headers, as in Spark's Kafka source
    assert got["rows"] == [
        expected,
        expected,
        [None] * 3 + [[["n", str(i)], ["empty", None]] for i in (3, 4, 5)],
    ]
    assert (got["after_import"], got["after_read"]) == (False, False)
