"""Fail closed: a broker without pyiceberg refuses a topic that asks for a table
(INVALID_CONFIG, saying why), and a broker that finds such a topic at start stops with a
one-line error instead of serving it without its table. pyiceberg's absence is real: the
broker's own process runs with ``sys.modules["pyiceberg"] = None`` (every import of it fails)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tables_support import create_table_topic

from gregor.testing import InProcessBroker

WITHOUT_PYICEBERG = "import sys; sys.modules['pyiceberg'] = None; "


@pytest.mark.process  # a Python process where pyiceberg cannot be imported
def test_a_table_topic_config_is_refused_without_pyiceberg() -> None:
    code = (
        WITHOUT_PYICEBERG
        + "from gregor.broker.config.topic_config_validator import value_error; "
        + "print(value_error('iceberg.mode', 'key_value')); "
        + "print(value_error('iceberg.mode', 'disabled'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == [
        "Invalid value key_value for configuration iceberg.mode: this broker cannot write "
        "Iceberg tables: pyiceberg is not installed (install gregor's 'tables' extra)",
        "None",
    ]


@pytest.mark.process  # a Python process where pyiceberg cannot be imported
def test_a_broker_without_pyiceberg_does_not_start_with_a_table_topic(tmp_path: Path) -> None:
    with InProcessBroker(data_dir=tmp_path) as broker:
        create_table_topic(broker.bootstrap_servers, "wants-a-table", 1)
    serve = (
        WITHOUT_PYICEBERG
        + "from gregor.cli.main import main; "
        + "sys.argv = ['gregor', 'serve', '--override', 'listeners=PLAINTEXT://127.0.0.1:0', "
        + f"'--override', 'log.dirs={tmp_path / 'logs'}']; main()"
    )
    done = subprocess.run([sys.executable, "-c", serve], capture_output=True, text=True)
    assert done.returncode != 0
    assert (
        "topic wants-a-table has iceberg.mode set, but pyiceberg is not installed" in done.stderr
    ), done.stderr


def test_a_catalog_the_broker_cannot_open_stops_it_at_start() -> None:
    import pytest

    from gregor.broker.config.broker_config import BrokerConfig, ConfigError

    with pytest.raises(ConfigError, match="iceberg.catalog.type=hive is not one of sql, rest"):
        BrokerConfig({"iceberg.catalog.type": "hive"})
    with pytest.raises(ConfigError, match="iceberg.catalog.type=rest needs iceberg.catalog.uri"):
        BrokerConfig({"iceberg.catalog.type": "rest"})
    with pytest.raises(ConfigError, match="iceberg.namespace='a.b' must be one non-empty name"):
        BrokerConfig({"iceberg.namespace": "a.b"})
    rest = BrokerConfig(
        {"iceberg.catalog.type": "rest", "iceberg.catalog.uri": "http://127.0.0.1:8181"}
    )
    assert rest["iceberg.catalog.uri"] == "http://127.0.0.1:8181"
