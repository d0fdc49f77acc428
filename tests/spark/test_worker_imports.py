"""What a Spark Python worker loads to read topics: Spark starts a fresh Python process for
each kind of data source call (lookup, create, plan, read, write, commit, a stream's runner), and
every one imports the source. pandas alone took about half a second of that; the read path does
not need it, so it must not import it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import Broker, create_topic, produce

from gregor.spark.session import worker_daemon
from gregor.spark_daemon import MODULE, installed_only

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


def test_the_installed_pyspark_and_py4j_replace_their_zips_and_jars(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    home = site / "pyspark"
    (home / "python" / "lib").mkdir(parents=True)
    (home / "jars").mkdir()
    (home / "__init__.py").write_text("")
    (site / "py4j-0.10.9.9.dist-info").mkdir()
    lib = home / "python" / "lib"
    ours = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")]
    core = str(home / "jars" / "spark-core_2.13-4.3.0.jar")
    other_py4j = str(lib / "py4j-0.10.9.7-src.zip")  # not the installed py4j's version
    elsewhere = "/opt/spark/python/lib/pyspark.zip"  # another Spark home's
    user = str(tmp_path / "mine.zip")
    path = ["", *ours, core, other_py4j, elsewhere, user, "/usr/lib/python311.zip", str(site)]
    assert installed_only(path) == [
        "",
        other_py4j,
        elsewhere,
        user,
        "/usr/lib/python311.zip",
        str(site),
    ]
    # a pyspark directory that is not on the path (a Spark home elsewhere) keeps its zips
    assert installed_only(path[:-1]) == path[:-1]


def test_only_local_workers_of_this_interpreter_start_from_gregors_daemon(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ours = {"spark.python.daemon.module": MODULE}
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert worker_daemon(None, {}) == ours
    assert worker_daemon("local[2]", {}) == ours
    assert worker_daemon("local-cluster[2,1,1024]", {}) == ours
    assert worker_daemon("spark://127.0.0.1:7077", {}) == {}
    assert worker_daemon("local[2]", {"spark.pyspark.python": "/usr/bin/python3"}) == {}
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3")
    assert worker_daemon("local[2]", {}) == {}
    assert worker_daemon("local[2]", {"spark.pyspark.python": sys.executable}) == ours


def test_the_sessions_workers_import_the_installed_pyspark(spark: Any) -> None:
    from pyspark.sql.functions import udf

    @udf("string", useArrow=False)  # a plain Python UDF: no type-hint inference
    def where(_: int) -> str:
        import json
        import os
        import sys

        import py4j
        import pyspark

        with open(f"/proc/{os.getppid()}/cmdline") as f:
            daemon = f.read().split("\0")
        zips = [p for p in sys.path if p.endswith((".zip", ".jar")) and "pyspark" in p]
        return json.dumps([pyspark.__file__, py4j.__file__, daemon, zips])

    pyspark_file, py4j_file, daemon, zips = json.loads(
        spark.range(1).select(where("id")).first()[0]
    )
    import py4j
    import pyspark

    assert (pyspark_file, py4j_file) == (pyspark.__file__, py4j.__file__)
    assert daemon[1:4] == ["-m", MODULE, "pyspark.worker"]
    assert zips == []
