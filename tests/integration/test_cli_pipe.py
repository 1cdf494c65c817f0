"""`mdmem search ... | head`: a reader that stops early ends the command quietly (exit 1, as
click does on the typer path), never with a traceback, whichever path answered."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "example_workspace"
BIN = Path(sys.executable).parent / "mdmem"


def _cut_short(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Runs ``mdmem argv`` with its stdout a pipe whose reader is gone before it writes."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [str(BIN), *argv], stdout=write, stderr=subprocess.PIPE, text=True, env=env, timeout=180
        )
    finally:
        os.close(write)
    return done


@pytest.mark.slow
@pytest.mark.parametrize("server", [True, False], ids=["through the server", "in process"])
def test_a_search_whose_reader_stops_ends_quietly(tmp_path: Path, server: bool) -> None:
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLE, root)
    (root / "mdmem.toml").write_text('mode = "full"\n[embedding]\nmodel = ""\n')
    env = {k: v for k, v in os.environ.items() if k != "MDMEM_WORKSPACE"}
    env["MDMEM_SERVER_AUTO"] = "1" if server else "0"
    search = ["-w", str(root), "search", "invoice", "-k", "5"]
    try:
        if server:  # the first search starts the server; the next is answered by it
            subprocess.run([str(BIN), *search], capture_output=True, env=env, check=True)
            deadline = time.monotonic() + 60
            while (
                "answered by the warm server"
                not in subprocess.run(
                    [str(BIN), *search, "-v"], capture_output=True, text=True, env=env
                ).stderr
            ):
                assert time.monotonic() < deadline, "the first search started no server"
                time.sleep(0.1)
        for argv in (search, [*search, "--json"], ["-w", str(root), "entries", "--json"]):
            done = _cut_short(argv, env)
            assert "Traceback" not in done.stderr, done.stderr
            assert done.returncode == 1, (argv, done.returncode, done.stderr)
    finally:
        subprocess.run([str(BIN), "-w", str(root), "server", "stop"], capture_output=True, env=env)
