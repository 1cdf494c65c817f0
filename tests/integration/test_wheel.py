"""The package a user installs: build the wheel, install it with the constraints file into a
fresh virtual environment, and use it from outside the repository.

This is what `pip install mdmem` gives a user; an editable install in the repository can hide a
missing dependency, a template left out of the wheel, or an import of a file that only exists
in the source tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"{args} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_dependencies_are_ranges_not_pins() -> None:
    """Users choose their own builds: the package declares ranges; `make` pins through
    constraints.txt what this machine resolves quickly."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pinned = [d for d in project["dependencies"] if "==" in d]
    assert pinned == []
    assert not any(d.startswith("torch") for d in project["dependencies"])
    constraints = (REPO / "constraints.txt").read_text()
    assert "litellm==" in constraints and "torch==" in constraints
    assert project["license"] == "MIT" and (REPO / "LICENSE").is_file()
    for name in ("watchdog", "python-frontmatter", "markdown-it-py", "sqlite-utils"):
        assert any(d.startswith(name) for d in project["dependencies"]), name
    for name in ("sentence-transformers", "litellm", "typer"):
        assert any(d.startswith(name) for d in project["dependencies"]), name


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a fresh venv installs torch and the rest from pip's cache
def test_the_wheel_installs_and_works_outside_the_repository(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        dist,
        REPO,
        cwd=tmp_path,
    )
    (wheel,) = dist.glob("mdmem-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "mdmem/templates/memory.md" in names and "mdmem/py.typed" in names
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert not any(n.startswith("tests/") for n in names)

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    constraints = REPO / "constraints.txt"
    # --no-compile: byte-compiling all of torch and the rest up front costs a minute of CPU;
    # the few modules the commands below import are compiled as they are
    pip = (python, "-m", "pip", "install", "--quiet", "--no-compile", "-c", constraints)
    _run(*pip, "torch", cwd=tmp_path)
    _run(*pip, wheel, cwd=tmp_path)

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}"
    mdmem = env_dir / "bin" / "mdmem"
    origin = _run(python, "-c", "import mdmem; print(mdmem.__file__)", cwd=outside, env=env)
    assert origin.startswith(str(env_dir)), origin  # the wheel's copy, not the source tree

    ws = outside / "ws"
    _run(mdmem, "-w", ws, "init", cwd=outside, env=env)
    assert (ws / "memory.md").is_file() and (ws / "mdmem.toml").is_file()
    _run(
        mdmem,
        "-w",
        ws,
        "remember",
        "The staging database listens on port 6543",
        cwd=outside,
        env=env,
    )
    found = json.loads(
        _run(mdmem, "-w", ws, "search", "staging database port", "--json", cwd=outside, env=env)
    )
    assert any("6543" in hit["text"] for hit in found["hits"]), found
    context = _run(mdmem, "-w", ws, "context", "which port does staging use", cwd=outside, env=env)
    assert "6543" in context
