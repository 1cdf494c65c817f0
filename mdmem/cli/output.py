"""What every command prints besides its own output: an error and its exit code, a warning,
JSON for programs, the library's log lines, all on the streams the CLI promises (data on
stdout, what went wrong on stderr)."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer


def fail(message: str, code: int = 1) -> NoReturn:
    """``mdmem: error: MESSAGE`` on stderr, then exit ``code`` (1 an error, 2 bad usage)."""
    typer.echo(f"mdmem: error: {message}", err=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    typer.echo(f"mdmem: warning: {message}", err=True)


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, ensure_ascii=False, indent=2))


def indent(text: str, pad: str = "  ") -> str:
    return "\n".join(pad + line for line in text.splitlines())


def log_to_stderr() -> None:
    """The library's log lines (a late save merged, a file skipped) on stderr, one line each."""
    import logging

    class CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
        """Writes to ``sys.stderr`` as it is when a record is emitted, not as it was when the
        handler was made: a background thread (late saves, the watcher) may log after a host
        swapped stderr and closed the old one, as a test runner's capture does."""

        @property  # type: ignore[override]
        def stream(self) -> Any:
            return sys.stderr

        @stream.setter
        def stream(self, _: Any) -> None:
            pass

    logger = logging.getLogger("mdmem")
    if not logger.handlers:
        handler = CurrentStderr()
        handler.setFormatter(logging.Formatter("mdmem: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
