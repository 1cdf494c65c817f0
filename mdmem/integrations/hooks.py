"""Claude Code hooks: memory that follows the agent with no code.

Three hooks in Claude Code's ``settings.json`` run ``mdmem hooks run claude-code ...``:

- ``SessionStart`` prints ``mdmem context`` (the memory section of a prompt), which Claude Code
  adds to the session's context;
- ``PreCompact``, ``Stop`` and ``SessionEnd`` import the session's log (``transcript_path`` in
  the JSON Claude Code sends on stdin) incrementally: each run appends only what is new, so
  nothing is lost when Claude Code compacts its context.

:func:`install` merges them into a settings file, keeping every other setting and hook.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdmem.errors import FileProblem

if TYPE_CHECKING:
    from mdmem import Workspace
    from mdmem.integrations.importers import ImportReport

EVENTS = {
    "SessionStart": "session-start",
    "PreCompact": "import",
    "Stop": "import",
    "SessionEnd": "import",
}
"""Claude Code's hook event → what mdmem does then."""
MARKER = "hooks run claude-code"
"""How mdmem recognizes its own hooks in a settings file (to update or remove them)."""
SCOPES = ("project", "local", "user")
AGENT = "claude-code"
"""The agent imported Claude Code sessions are recorded under."""


@dataclass(frozen=True)
class InstallReport:
    """What installing or removing the hooks did to one settings file."""

    settings: Path
    added: tuple[str, ...]
    updated: tuple[str, ...]
    removed: tuple[str, ...]
    text: str
    """The settings file's new text."""
    dry_run: bool = False

    def summary(self) -> str:
        done = [
            f"{verb} {', '.join(events)}"
            for verb, events in (
                ("added", self.added),
                ("updated", self.updated),
                ("removed", self.removed),
            )
            if events
        ]
        what = "; ".join(done) or "already as wanted"
        prefix = "would change" if self.dry_run else "hooks"
        return f"{self.settings}: {prefix}: {what}"


def settings_path(scope: str, project: Path, home: Path | None = None) -> Path:
    """Where Claude Code reads hooks: ``project`` (``.claude/settings.json``, shared with the
    team), ``local`` (``.claude/settings.local.json``, yours) or ``user`` (``~/.claude``)."""
    if scope == "project":
        return project / ".claude" / "settings.json"
    if scope == "local":
        return project / ".claude" / "settings.local.json"
    if scope == "user":
        return (home or Path.home()) / ".claude" / "settings.json"
    raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")


def commands(
    workspace: Path,
    executable: str | None = None,
    *,
    extract: bool = False,
    budget: int | None = None,
    project: Path | None = None,
) -> dict[str, str]:
    """The command each hook runs. By default the workspace and this installation's mdmem by
    absolute path (Claude Code starts hooks in the project's folder, which need not be the
    workspace): right for ``--scope local`` and ``user``, this machine's own settings. With
    ``project`` (``--scope project``: ``.claude/settings.json``, which the team shares) the
    commands must work in any clone: the workspace relative to ``$CLAUDE_PROJECT_DIR`` (it must
    be inside the project) and ``mdmem`` as found on PATH (:func:`portable_command`)."""
    if project is None:
        program = shlex.quote(executable) if executable else mdmem_command()
        where = shlex.quote(str(workspace.absolute()))
    else:
        program = shlex.quote(executable) if executable else portable_command()
        where = project_relative(workspace, project)
    base = f"{program} -w {where} {MARKER}"
    out = {}
    for event, action in EVENTS.items():
        extra = ""
        if action == "import" and extract:
            extra = " --extract"
        if action == "session-start" and budget is not None:
            extra = f" --budget-tokens {int(budget)}"
        out[event] = f"{base} {action}{extra}"
    return out


def project_relative(workspace: Path, project: Path) -> str:
    """``"$CLAUDE_PROJECT_DIR/…"``: the workspace as every clone of the project finds it (a
    shell word, double-quoted so the variable expands and nothing else does)."""
    real_ws, real_project = Path(os.path.realpath(workspace)), Path(os.path.realpath(project))
    try:
        rel = real_ws.relative_to(real_project).as_posix()
    except ValueError:
        raise FileProblem(
            str(workspace),
            f"is not inside the project {project}: .claude/settings.json is shared with the "
            "team, whose clones would not have it. Put the workspace in the project, or use "
            "--scope local (this machine only)",
        ) from None
    inner = "" if rel == "." else "/" + "".join(f"\\{c}" if c in '"\\$`' else c for c in rel)
    return f'"$CLAUDE_PROJECT_DIR{inner}"'


def portable_command() -> str:
    """``mdmem`` when it is on PATH here (so, presumably, on the team's), else ``python3 -m
    mdmem`` (or ``python``): a command with no path of this machine in it."""
    if shutil.which("mdmem"):
        return "mdmem"
    python = next((name for name in ("python3", "python") if shutil.which(name)), "python3")
    return f"{python} -m mdmem"


def mdmem_command() -> str:
    """This installation's ``mdmem`` as a shell command, by absolute path: the script beside
    the running Python, else that Python with ``-m mdmem`` (Claude Code's PATH need not hold
    ``mdmem``). Hooks are found again by :data:`MARKER`, whatever program they name."""
    beside = Path(sys.executable).parent / "mdmem"
    if beside.exists():
        return shlex.quote(str(beside))
    return f"{shlex.quote(sys.executable)} -m mdmem"


def install(settings: Path, wanted: Mapping[str, str], *, dry_run: bool = False) -> InstallReport:
    """Merge mdmem's hooks into ``settings`` (created if missing): an mdmem hook already there
    is updated in place, every other setting and hook stays as it was."""
    data = _load(settings)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise FileProblem(str(settings), "'hooks' is not an object; nothing written")
    added: list[str] = []
    updated: list[str] = []
    for event, command in wanted.items():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise FileProblem(str(settings), f"'hooks.{event}' is not a list; nothing written")
        mine = [h for g in groups if isinstance(g, dict) for h in g.get("hooks", []) if _ours(h)]
        if not mine:
            groups.append({"hooks": [{"type": "command", "command": command}]})
            added.append(event)
            continue
        if any(h.get("command") != command for h in mine):
            for hook in mine:
                hook["command"] = command
            updated.append(event)
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if (added or updated) and not dry_run:
        _write(settings, text)
    return InstallReport(settings, tuple(added), tuple(updated), (), text, dry_run)


def uninstall(settings: Path, *, dry_run: bool = False) -> InstallReport:
    """Remove mdmem's hooks from ``settings``; everything else stays."""
    data = _load(settings)
    hooks = data.get("hooks")
    removed: list[str] = []
    if isinstance(hooks, dict):
        for event in list(hooks):
            groups = hooks[event]
            if not isinstance(groups, list):
                continue
            kept_groups = []
            for group in groups:
                if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                    kept = [h for h in group["hooks"] if not _ours(h)]
                    if len(kept) != len(group["hooks"]):
                        removed.append(event)
                    if not kept:
                        continue
                    group = {**group, "hooks": kept}
                kept_groups.append(group)
            if kept_groups:
                hooks[event] = kept_groups
            else:
                del hooks[event]
        if not hooks:
            del data["hooks"]
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if removed and not dry_run:
        _write(settings, text)
    return InstallReport(settings, (), (), tuple(dict.fromkeys(removed)), text, dry_run)


def _ours(hook: Any) -> bool:
    return isinstance(hook, dict) and MARKER in str(hook.get("command", ""))


def _load(settings: Path) -> dict[str, Any]:
    if not settings.exists():
        return {}
    text = settings.read_text(encoding="utf-8")
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FileProblem(
            str(settings), f"not JSON ({exc.msg}); nothing written", exc.lineno
        ) from None
    if not isinstance(data, dict):
        raise FileProblem(str(settings), "not a JSON object; nothing written")
    return data


def _write(path: Path, text: str) -> None:
    """Replace the file whole or not at all (a settings file half written breaks Claude Code)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


# ---- what the hooks do ----------------------------------------------------------------------


def read_input(text: str) -> dict[str, Any]:
    """The JSON Claude Code sends a hook on stdin (empty when run by hand)."""
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"hook input is not JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ValueError("hook input is not a JSON object")
    return data


def transcript_roots(workspace: Path) -> list[Path]:
    """Where a hook may read a transcript from: Claude Code's ``projects`` folder (in
    ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``: the local user's own sessions, which the hook
    runs as) and the workspace."""
    config = os.environ.get("CLAUDE_CONFIG_DIR")
    base = Path(config).expanduser() if config else Path.home() / ".claude"
    return [base / "projects", workspace]


def session_start(ws: Workspace, budget: int | None = None) -> str:
    """The memory section Claude Code adds to a new (or resumed, or compacted) session."""
    return ws.build_context(None, budget, agent=AGENT).text


def import_transcript(
    ws: Workspace, payload: Mapping[str, Any], *, extract: bool = False
) -> ImportReport | None:
    """Import the session log the hook names (only its new turns); None when it names none
    or the log does not exist yet (a session with nothing said).

    ``transcript_path`` goes through the resolver for hook payloads: it must lie (symlinks
    followed) where Claude Code keeps transcripts (:func:`transcript_roots`) or inside the
    workspace; any other file is refused (UnsafePathError naming ``transcript_path``), so a
    payload cannot make the hook copy an arbitrary file into the memory."""
    from mdmem.integrations import hook_state
    from mdmem.integrations.importers import import_path
    from mdmem.paths import client_file

    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not transcript:
        return None
    path = client_file(transcript, transcript_roots(ws.root), "transcript_path")
    if not path.is_file():
        return None
    before = hook_state.stat_of(os.path.realpath(transcript))
    report = import_path(ws, path, "claude-code", extract=extract, agent=AGENT)
    hook_state.remember(ws.root, transcript, before, report)  # (for the next run: unchanged)
    return report
