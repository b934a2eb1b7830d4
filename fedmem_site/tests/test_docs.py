"""The documentation stays true to the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE_DIRS = ["fedmem_site", "core", "governance", "memory", "providers", "fedmem_mcp"]


def variables_read_by_code() -> set[str]:
    names: set[str] = set()
    for folder in CODE_DIRS:
        for path in (ROOT / folder).rglob("*.py"):
            if "tests" in path.parts:
                continue
            names |= set(re.findall(r"env_\w+\(\s*\"([A-Z][A-Z0-9_]+)\"", path.read_text()))
    return names


def test_every_environment_variable_is_documented():
    documented = set(
        re.findall(r"^\| `([A-Z][A-Z0-9_]+)`", (ROOT / "docs/configuration.md").read_text(), re.M)
    )
    missing = variables_read_by_code() - documented
    assert not missing, f"undocumented in docs/configuration.md: {sorted(missing)}"


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^(make \w+)$", quickstart, re.M)
    assert commands == ["make run", "make test"]
    ci = [
        line
        for line in (ROOT / ".ci/run").read_text().splitlines()
        if line and not line.startswith(("#", "set ", "cd "))
    ]
    assert ci == ["make test"]
