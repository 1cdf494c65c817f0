"""`mdmem` run in this process through typer's CliRunner: the real entry point's error handling
and exit codes (``mdmem.cli.main``), without a Python start-up per call. End-to-end tests that
need a real process (the console script, the search fast path, signals) run one themselves."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner


@dataclass(frozen=True)
class Ran:
    """What a run left: the fields of ``subprocess.CompletedProcess`` the tests read."""

    returncode: int
    stdout: str
    stderr: str


def mdmem(
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str | None] | None = None,
    input: str | None = None,
) -> Ran:
    """``mdmem ARGS`` in ``cwd``; ``env`` overrides (None unsets). ``$MDMEM_WORKSPACE`` is
    unset unless ``env`` sets it, so the workspace is the one the arguments or ``cwd`` name."""
    from mdmem.cli import main

    overrides: dict[str, str | None] = {"MDMEM_WORKSPACE": None, **(env or {})}
    runner = CliRunner()
    with runner.isolation(input=input, env=overrides) as (out, err, _mixed):
        argv, here = sys.argv, os.getcwd()
        sys.argv = ["mdmem", *args]
        code = 0
        try:
            if cwd is not None:
                os.chdir(cwd)
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            sys.argv = argv
            os.chdir(here)
            sys.stdout.flush()  # (print buffers; typer.echo flushes)
            sys.stderr.flush()
        stdout = out.getvalue().decode("utf-8", "replace")
        stderr = err.getvalue().decode("utf-8", "replace")
    return Ran(code, stdout, stderr)
