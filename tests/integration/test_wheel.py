"""The package a user installs: build the wheel, install it into a fresh virtual environment
that holds only what it declares, and use it from outside the repository.

This is what `pip install mdmem` gives a user; an editable install in the repository can hide a
missing dependency, a template left out of the wheel, or an import of a file that only exists
in the source tree.
"""

from __future__ import annotations

import email
import importlib.metadata
import json
import os
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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


def _closure(requirements: list[str]) -> list[importlib.metadata.Distribution]:
    """The installed distributions ``requirements`` need, transitively (markers and extras
    evaluated for this interpreter): what a fresh ``pip install`` of the wheel would bring."""
    found: dict[str, importlib.metadata.Distribution] = {}
    queue = [(Requirement(r), "") for r in requirements]
    while queue:
        requirement, extra = queue.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        dist = importlib.metadata.distribution(name)  # PackageNotFoundError: not installed here
        assert dist.version in requirement.specifier or not requirement.specifier, requirement
        extras = sorted(requirement.extras)
        key = name + "[" + ",".join(extras) + "]"
        if key in found:
            continue
        found[key] = dist
        for raw in dist.requires or []:
            for wanted in extras or [""]:
                queue.append((Requirement(raw), wanted))
    return list({d.metadata["Name"]: d for d in found.values()}.values())


def _farm(dists: list[importlib.metadata.Distribution], farm: Path) -> None:
    """A folder that holds exactly ``dists`` (each top-level package, module and metadata
    folder linked from where it is installed): on ``sys.path`` it is an environment with
    those distributions and nothing else, made in a second instead of installing torch."""
    for dist in dists:
        for file in dist.files or []:
            top = file.parts[0]
            if top in ("..", "__pycache__") or top.endswith(".pth"):
                continue  # scripts outside site-packages; caches; .pth files (never run here)
            source = Path(str(dist.locate_file(top)))
            link = farm / top
            if link.is_symlink() and link.resolve() != source.resolve() and source.is_dir():
                shared = link.resolve()  # a namespace package two distributions share
                link.unlink()
                link.mkdir()
                for child in (*shared.iterdir(), *source.iterdir()):
                    if not (link / child.name).exists():
                        (link / child.name).symlink_to(child)
            elif not link.exists():
                link.symlink_to(source)


@pytest.mark.slow
def test_the_wheel_installs_and_works_outside_the_repository(tmp_path: Path) -> None:
    """The wheel, in a fresh environment holding only what it declares.

    The declared dependencies (and theirs) are linked in from this environment rather than
    installed again: a fresh install of torch and the rest took 6-7 minutes of the suite, and
    ``make test`` already installs them from scratch on every clean clone. What this test is
    for stays: a dependency used but not declared is missing here (its import fails), and the
    package runs from the wheel's files, not the source tree."""
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
    archive = zipfile.ZipFile(wheel)
    names = archive.namelist()
    assert "mdmem/templates/memory.md" in names and "mdmem/py.typed" in names
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert not any(n.startswith("tests/") for n in names)
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    message = email.message_from_bytes(archive.read(metadata))
    declared = [r for r in message.get_all("Requires-Dist") or [] if "extra ==" not in r]

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(
        _run(
            python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=tmp_path
        ).strip()
    )
    farm = tmp_path / "declared"
    farm.mkdir()
    _farm(_closure(declared), farm)
    (site / "declared.pth").write_text(f"{farm}\n")
    pip = (sys.executable, "-m", "pip", "--python", python)
    _run(*pip, "install", "--quiet", "--no-deps", "--no-compile", wheel, cwd=tmp_path)
    _run(*pip, "check", cwd=tmp_path)  # every requirement of the wheel is met, at its version

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}"
    mdmem = env_dir / "bin" / "mdmem"
    origin = _run(python, "-c", "import mdmem; print(mdmem.__file__)", cwd=outside, env=env)
    assert origin.startswith(str(env_dir)), origin  # the wheel's copy, not the source tree
    # nothing only the development environment has: no test tool, no optional extra
    absent = _run(
        python,
        "-c",
        "import importlib.util as u; print([m for m in ('pytest', 'hypothesis', 'mcp', "
        "'langgraph', 'agents', 'anthropic', 'psycopg') if u.find_spec(m)])",
        cwd=outside,
        env=env,
    )
    assert absent.strip() == "[]", absent

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
