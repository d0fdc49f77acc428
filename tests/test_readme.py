"""README.md's snippets run exactly as written (issue 42), and the files it names exist.

Theory of operation. Every fenced block of the README has a language: ``bash`` and ``python``
blocks run, in the README's order, in a scratch directory that holds the repository's
top-level entries as symlinks (so ``.venv/bin/gregor`` and ``scripts/...`` work as in a clone,
and ``./gregor-data`` lands in the scratch directory); ``text`` and ``properties`` blocks are
not programs. An HTML comment right before a block tells this test more:

- ``<!-- readme-test: background until "TEXT" -->``: a server (a broker) runs in the
  background, as in a second terminal, once TEXT is in its output; a later background block,
  or the end of the README, stops it with Ctrl-C (SIGINT);
- ``<!-- readme-test: skip: REASON -->``: not run here, for the reason given (kept few: the
  main job at volume, the test suite itself, a Spark or etcd cluster).

A block without a language, with another one, or a code block by indentation fails the test,
so every new snippet is either run or explicitly excused. The snippets use 127.0.0.1:9092, as
written, which must be free. Spark's snippet needs Java, as the Spark tests do.

Most of this test's time is the Spark snippets' JVMs: a block started once the run's archive
of Spark's classes is built (``gregor.testing.jvm_archive``, tests/conftest.py) gets it in
``JDK_JAVA_OPTIONS``, as the Spark tests' JVMs do; nothing waits for it.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARK = re.compile(r"^\s*<!--\s*readme-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
RUN = {"bash", "python"}
NOT_RUN = {"text", "properties"}
MAX_SKIPPED = 6
# backticked paths inside the repository: they must exist
PATH = re.compile(r"`((?:\.\./|\.ci/|bench/|config/|docs/|scripts/|src/|tests/|tools/)[^`\s]*)`")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


@dataclass
class Block:
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    mark: str | None

    @property
    def skip_reason(self) -> str | None:
        if self.mark and self.mark.startswith("skip:"):
            return self.mark[len("skip:") :].strip()
        return None

    @property
    def ready_text(self) -> str | None:
        m = re.fullmatch(r'background until "(.+)"', self.mark or "")
        return m.group(1) if m else None


def parse(text: str) -> list[Block]:
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        mark = MARK.match(prev)
        body = []
        i += 1
        while not lines[i].strip().startswith("```"):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        blocks.append(
            Block(i - len(body), lang, "\n".join(body) + "\n", mark.group(1) if mark else None)
        )
        i += 1
    return blocks


def indented_code(text: str) -> list[int]:
    """Lines that start a code block by indentation (4 spaces after a blank line, outside a
    fence and outside a list item's continuation)."""
    found, in_fence, prev = [], False, ""
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and line.startswith("    ") and not prev.strip() and line.strip():
            found.append(n)
        prev = line
    return found


def test_every_block_is_run_or_excused() -> None:
    text = README.read_text()
    assert indented_code(text) == [], "indented code blocks: fence them with a language"
    blocks = parse(text)
    problems = [
        f"line {b.line}: language {b.lang!r}" for b in blocks if b.lang not in RUN | NOT_RUN
    ]
    problems += [
        f"line {b.line}: readme-test mark {b.mark!r}"
        for b in blocks
        if b.mark is not None and b.skip_reason is None and b.ready_text is None
    ]
    assert not problems, (
        "README blocks need a language (bash, python, text, properties):\n" + "\n".join(problems)
    )
    skipped = [b for b in blocks if b.skip_reason]
    assert all(b.skip_reason for b in skipped) and len(skipped) <= MAX_SKIPPED, [
        b.line for b in skipped
    ]
    runnable = [b for b in blocks if b.lang in RUN and not b.skip_reason]
    assert len(runnable) >= 6


def test_the_files_it_names_exist() -> None:
    missing = []
    for n, line in enumerate(README.read_text().splitlines(), 1):
        for path in PATH.findall(line):
            if path.startswith("../"):
                missing.append(f"line {n}: {path} is outside the repository")
            elif "<" not in path and "*" not in path and not (ROOT / path.rstrip(".,;:")).exists():
                missing.append(f"line {n}: {path}")
    assert not missing, "\n".join(missing)


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A directory that looks like the repository's root, whose files are the repository's."""
    with tempfile.TemporaryDirectory(prefix="gregor-readme-") as d:
        work = Path(d)
        for entry in ROOT.iterdir():
            if entry.name not in (".git", "gregor-data"):
                (work / entry.name).symlink_to(entry)
        yield work


class Background:
    """A block that runs on, as in another terminal."""

    def __init__(self, block: Block, work: Path, env: dict[str, str]) -> None:
        self.block = block
        self.log = work / f"background-{block.line}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                ["bash", "-euo", "pipefail", "-c", block.code],
                cwd=work,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        ready = block.ready_text or ""
        while ready not in self.output():
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"README line {block.line} ended ({self.proc.returncode}):\n{self.output()}"
                )
            time.sleep(0.1)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)  # Ctrl-C
            self.proc.wait(120)
        assert self.proc.returncode in (0, -signal.SIGINT), (
            f"README line {self.block.line}:\n{self.output()}"
        )


def with_jvm_archive(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the run's archive of Spark's classes for the JVMs, once it is built."""
    directory = os.environ.get("GREGOR_TEST_JVM_ARCHIVE", "off")
    if directory == "off" or "-XX:SharedArchiveFile" in env.get("JDK_JAVA_OPTIONS", ""):
        return env
    from gregor.testing.jvm_archive import java_options

    options = java_options(Path(directory))
    if not options:
        return env
    return {**env, "JDK_JAVA_OPTIONS": f"{env.get('JDK_JAVA_OPTIONS', '')} {options}".strip()}


def test_the_snippets_run_as_written(scratch: Path) -> None:
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", 9092)) == 0:
            pytest.fail(
                "something listens on 127.0.0.1:9092, the README's broker address: the snippets run as written"
            )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")}
    outputs: dict[int, str] = {}
    running: list[Background] = []
    try:
        for block in parse(README.read_text()):
            if block.lang not in RUN or block.skip_reason:
                continue
            if block.ready_text is not None:
                while running:
                    running.pop().stop()
                running.append(Background(block, scratch, env))
                continue
            argv = (
                ["bash", "-euo", "pipefail", "-c", block.code]
                if block.lang == "bash"
                else [str(scratch / ".venv" / "bin" / "python"), "-c", block.code]
            )
            r = subprocess.run(
                argv,
                cwd=scratch,
                env=with_jvm_archive(env),
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert r.returncode == 0, (
                f"README line {block.line} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
            )
            outputs[block.line] = r.stdout
    finally:
        while running:
            running.pop().stop()
    # what the first steps promise: the records read back, from the command line and from Python
    first = [out for out in outputs.values() if "alice\tsigned up" in out]
    assert first and first[0].splitlines()[0] == "Created topic events."
    read = first[0].splitlines()[1:3]  # the two partitions' records, in either order
    assert sorted(read) == ["alice\tsigned up", "bob\tclicked buy"]
    python = [out for out in outputs.values() if "(partition" in out]
    assert python and [ln.split(" (")[0] for ln in python[0].splitlines()] == [
        "alice signed up",
        "alice paid",
        "bob clicked buy",
    ]
