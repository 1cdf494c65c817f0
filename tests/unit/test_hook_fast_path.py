"""`mdmem hooks run` without typer (mdmem/console.py): it reads exactly what the typer command
reads, and hands everything else to typer."""

from __future__ import annotations

import pytest

from mdmem.console import parse_hook


def _typer_hooks_run():  # type: ignore[no-untyped-def]
    import typer

    from mdmem.cli import app

    group = typer.main.get_command(app).commands["hooks"]  # type: ignore[attr-defined]
    return group.commands["run"]


@pytest.mark.parametrize(
    "argv",
    [
        ["hooks", "run", "claude-code", "session-start"],
        ["-w", "/x", "hooks", "run", "claude-code", "import"],
        ["--workspace=/x", "hooks", "run", "claude-code", "import", "--extract"],
        ["hooks", "run", "claude-code", "session-start", "--budget-tokens", "2000"],
        ["hooks", "run", "claude-code", "session-start", "--budget-tokens=300"],
        ["hooks", "run", "claude-code", "session-start", "-b", "50"],
        # the old name, in the hook settings written before issue 42
        ["hooks", "run", "claude-code", "session-start", "--budget", "2000"],
        ["hooks", "run", "claude-code", "session-start", "--budget=300"],
    ],
)
def test_the_light_hook_path_reads_what_typer_reads(argv: list[str]) -> None:
    read = parse_hook(argv)
    assert read is not None
    workspace, action, extract, budget = read
    at = argv.index("hooks")
    ctx = _typer_hooks_run().make_context("run", argv[at + 2 :])
    params = dict(ctx.params)
    old = params.pop("old_budget")  # (--budget: the old name, a hidden option of its own)
    params["budget"] = params["budget"] if params["budget"] is not None else old
    assert params == {
        "target": "claude-code", "action": action, "extract_": extract, "budget": budget
    }  # fmt: skip
    assert workspace == ({"-w": argv[1]} if argv[0] == "-w" else {}).get("-w") or (
        argv[0].split("=", 1)[1] if argv[0].startswith("--workspace=") else None
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["hooks", "run", "claude-code"],
        ["hooks", "run", "cursor", "import"],
        ["hooks", "run", "claude-code", "stop"],
        ["hooks", "run", "claude-code", "import", "--budget", "many"],
        ["hooks", "run", "claude-code", "import", "--help"],
        ["hooks", "install", "claude-code"],
        ["-w"],
        [],
    ],
)
def test_anything_else_goes_to_typer(argv: list[str]) -> None:
    assert parse_hook(argv) is None
