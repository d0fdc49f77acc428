"""The map matches the tree (issue 36): ``docs/architecture.md`` names every package under
``src/gregor`` and draws the layers contract of ``pyproject.toml`` as it is, and the README's
Layout section points at it and names every package too."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = sorted(p.parent.name for p in (ROOT / "src" / "gregor").glob("*/__init__.py"))


def _section(text: str, heading: str) -> str:
    start = text.index(heading + "\n")
    end = text.find("\n## ", start + len(heading))
    return text[start:] if end < 0 else text[start:end]


def test_the_package_table_names_every_package() -> None:
    table = _section(DOC.read_text(), "## The package map")
    named = sorted(set(re.findall(r"^\| `(\w+)/` \|", table, re.MULTILINE)))
    assert named == PACKAGES


def test_the_layers_drawn_are_the_contract() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(
        c for c in config["tool"]["importlinter"]["contracts"] if c["name"].startswith("Layers:")
    )
    wanted = [
        [name.strip().strip("()").removeprefix("gregor.") for name in layer.split("|")]
        for layer in contract["layers"]
    ]
    block = re.search(
        r"```text\n(.*?)```", _section(DOC.read_text(), "## The package map"), re.DOTALL
    )
    assert block is not None
    drawn = [
        [name.strip() for name in line.split("(")[0].split("|")]
        for line in block.group(1).splitlines()
        if line.strip()
    ]
    assert drawn == wanted


def test_the_readme_layout_points_at_the_map_and_names_every_package() -> None:
    layout = _section((ROOT / "README.md").read_text(), "## Layout")
    assert "`docs/architecture.md`" in layout
    assert [p for p in PACKAGES if f"`{p}/`" not in layout] == []
