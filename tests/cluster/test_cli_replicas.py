"""``gregor reassign`` and ``gregor leader-election`` on a 3-broker cluster (real brokers in
this process, ``InProcessCluster``), their effects read back with confluent-kafka's metadata."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from replication_helpers import metadata_until, partition_until

from gregor.testing.cli import run_command
from gregor.testing.inprocess_cluster import InProcessCluster

pytestmark = [pytest.mark.timeout(300)]


def gregor(cluster: InProcessCluster, *args: str) -> tuple[int, str, str]:
    return run_command(cluster.bootstrap_servers, *args)


def test_generate_execute_verify_and_elect(cluster: InProcessCluster, tmp_path: Path) -> None:
    metadata_until(cluster, lambda m: len(m.brokers) == 3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("moved", 2, replica_assignment=[[1, 2], [2, 1]])])[
        "moved"
    ].result(30)
    for i in range(2):
        partition_until(cluster, "moved", i, lambda p: len(p.isrs) == 2)

    # --generate: every partition over brokers 2 and 3, replication factor kept
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "moved"}]}))
    code, out, _ = gregor(
        cluster,
        "reassign",
        "--generate",
        "--topics-to-move-json-file",
        str(topics),
        "--broker-list",
        "2,3",
    )
    lines = out.splitlines()
    assert code == 0 and lines[0] == "Current partition replica assignment"
    current = json.loads(lines[1])
    assert [(p["partition"], p["replicas"]) for p in current["partitions"]] == [
        (0, [1, 2]),
        (1, [2, 1]),
    ]
    proposed = json.loads(lines[4])
    assert all(sorted(p["replicas"]) == [2, 3] for p in proposed["partitions"])

    # --execute partition 0 onto [3, 2]; --verify until it is done
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "moved", "partition": 0, "replicas": [3, 2]}]}
        )
    )
    code, out, _ = gregor(cluster, "reassign", "--reassignment-json-file", str(plan), "--execute")
    assert (
        code == 0
        and out.splitlines()[-1] == "Successfully started partition reassignments for moved-0"
    )
    assert json.loads(out.splitlines()[2])["partitions"][0]["replicas"] == [
        1,
        2,
    ]  # the rollback plan
    while True:
        code, out, _ = gregor(
            cluster, "reassign", "--reassignment-json-file", str(plan), "--verify"
        )
        if code == 0:
            break
        assert "is still in progress" in out or "rather than" in out
    assert out.splitlines()[1] == "Reassignment of partition moved-0 is completed."
    moved = partition_until(cluster, "moved", 0, lambda p: sorted(p.isrs) == [2, 3])
    assert moved.replicas == [3, 2]

    # a preferred election makes broker 3, the first replica, the leader (or it already is)
    code, out, _ = gregor(
        cluster,
        "leader-election",
        "--election-type",
        "preferred",
        "--topic",
        "moved",
        "--partition",
        "0",
    )
    assert code == 0 and out in (
        "Successfully completed leader election (PREFERRED) for partitions moved-0\n",
        "Valid replica already elected for partitions moved-0\n",
    )
    assert partition_until(cluster, "moved", 0, lambda p: p.leader == 3).leader == 3
    code, out, _ = gregor(
        cluster, "leader-election", "--election-type", "preferred", "--all-topic-partitions"
    )
    assert code == 0 and "moved-0" in out
    code, out, _ = gregor(
        cluster,
        "leader-election",
        "--election-type",
        "preferred",
        "--topic",
        "moved",
        "--partition",
        "0",
        "--output",
        "json",
    )
    assert (code, json.loads(out)) == (
        0,
        {"election_type": "PREFERRED", "elected": [], "not_needed": ["moved-0"], "errors": {}},
    )
    code, out, _ = gregor(
        cluster, "reassign", "--reassignment-json-file", str(plan), "--verify", "--output", "json"
    )
    assert (code, json.loads(out)) == (0, {"moved-0": "completed"})

    # bad input: usage errors (exit 2) and a broker's refusal (exit 1)
    assert gregor(cluster, "reassign", "--reassignment-json-file", str(plan))[0] == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"partitions": [{"topic": "moved"}]}')
    assert gregor(cluster, "reassign", "--reassignment-json-file", str(bad), "--execute")[0] == 2
    assert gregor(cluster, "leader-election", "--election-type", "preferred")[0] == 2
    bad.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "moved", "partition": 1, "replicas": [9, 2]}]}
        )
    )
    code, _, err = gregor(cluster, "reassign", "--reassignment-json-file", str(bad), "--execute")
    assert code == 1 and "moved-1" in err
