"""Workspace: init, discovery, config validation, and the remember/update/supersede API."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mdmem import (
    ConfigError,
    ConflictError,
    EntryNotFoundError,
    UnsafePathError,
    Workspace,
    WorkspaceNotFoundError,
)
from mdmem.memory.templates import TEMPLATES
from mdmem.writes.file_state import Target


def test_init_writes_every_template_and_never_overwrites(tmp_path: Path) -> None:
    root = tmp_path / "w"
    root.mkdir()
    (root / "memory.md").write_text("# Mine\n- keep me\n")
    ws = Workspace.init(root, mode="minimal", agent="coder")
    full_only = {"task_process.md", "world_state.md"}
    for name in TEMPLATES.values():
        assert (root / name).is_file() == (name not in full_only), name
    assert not (root / ".sessions").exists()  # minimal mode writes no session files
    assert (root / "memory.md").read_text() == "# Mine\n- keep me\n"
    assert ".mdmem/" in (root / ".gitignore").read_text()
    assert ws.config.mode == "minimal" and ws.config.agent == "coder"
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    Workspace.init(root, mode="full", agent="other")  # twice is safe: only adds what is missing
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert {p: after[p] for p in before} == before
    assert {p.name for p in after if p not in before} == full_only
    assert (root / ".sessions").is_dir()


def test_fresh_workspace_has_no_entries_from_template_prose(ws: Workspace) -> None:
    assert [e for e in ws.entries() if e.path in ("memory.md", "learnings.md")] == []


def test_discovery_explicit_env_and_walking_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "proj"
    Workspace.init(root)
    deep = root / "src" / "pkg"
    deep.mkdir(parents=True)
    monkeypatch.delenv("MDMEM_WORKSPACE", raising=False)
    monkeypatch.chdir(deep)
    assert Workspace.open().root == root
    other = tmp_path / "other"
    Workspace.init(other)
    monkeypatch.setenv("MDMEM_WORKSPACE", str(other))
    assert Workspace.open().root == other
    assert Workspace.open(root).root == root  # an explicit path wins over the variable
    monkeypatch.delenv("MDMEM_WORKSPACE")
    bare = tmp_path / "bare"
    bare.mkdir()
    monkeypatch.chdir(bare)
    with pytest.raises(WorkspaceNotFoundError, match="mdmem init"):
        Workspace.open()
    with pytest.raises(WorkspaceNotFoundError):
        Workspace.open(tmp_path / "missing")


def test_memory_md_alone_marks_a_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "memory.md").write_text("- a fact\n")
    monkeypatch.delenv("MDMEM_WORKSPACE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert [e.text for e in Workspace.open().entries()] == ["a fact"]


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('mode = "huge"', "mode must be 'minimal' or 'full'"),
        ("colour = 1", "unknown key 'colour'; allowed here: mode, agent, files"),
        ("[files]\nmax_file_mb = 'ten'", "files.max_file_mb must be float"),
        ("[files]\ninclude = 'x'", "files.include must be a list of str"),
        ("[files]\nsize = 1", "unknown key 'files.size'"),
        ('agent = "../etc"', "invalid agent name"),
        ("mode = ", "invalid TOML"),
    ],
)
def test_config_errors_name_the_key(tmp_path: Path, toml: str, message: str) -> None:
    (tmp_path / "mdmem.toml").write_text(toml + "\n")
    with pytest.raises(ConfigError, match=r"mdmem\.toml") as info:
        Workspace(tmp_path)
    assert message in str(info.value)


def test_config_values_are_used(tmp_path: Path) -> None:
    (tmp_path / "mdmem.toml").write_text(
        'mode = "minimal"\nagent = "a1"\n[files]\nexclude = ["drafts/"]\nmax_file_mb = 0.001\n'
    )
    (tmp_path / "drafts").mkdir()
    (tmp_path / "drafts" / "x.md").write_text("- hidden\n")
    (tmp_path / "big.md").write_text("- " + "x" * 2000 + "\n")
    (tmp_path / "ok.md").write_text("- shown\n")
    ws = Workspace(tmp_path)
    assert (ws.config.mode, ws.config.agent) == ("minimal", "a1")
    snap = ws.files.all()
    assert [d.path for d in snap.documents] == ["ok.md"]
    assert [p.path for p in snap.problems] == ["big.md"]


def test_example_workspace_parses_cleanly(example: Workspace) -> None:
    snap = example.files.all()
    assert snap.problems == ()
    paths = {d.path for d in snap.documents}
    assert {"memory.md", "learnings.md", "task_process.md", "world_state.md"} <= paths
    assert len([p for p in paths if p.startswith(".sessions/")]) >= 3
    types = {e.type for e in snap.entries() if e.path == "memory.md"}
    assert {"preference", "fact", "pattern"} <= types
    assert {e.type for e in snap.entries() if e.path == "learnings.md"} == {"skill"}
    assert any(e.archived for e in snap.entries(include_archived=True))


def test_remember_routes_by_type_and_creates_missing_headings(ws: Workspace) -> None:
    skill = ws.remember("Run `pytest -x` before pushing", type="skill", importance=0.9)
    assert skill.path == "learnings.md" and skill.heading_path[-1] == "Skills"
    pref = ws.remember("Prefers British spelling", type="preference", source="20261122_101010_a")
    assert pref.path == "memory.md" and pref.heading_path[-1] == "Preferences"
    assert pref.source == "20261122_101010_a" and pref.created
    (ws.root / "memory.md").write_text("# Memory\n\nSome prose.\n")
    fact = ws.remember("The API listens on 8000", type="fact")
    text = (ws.root / "memory.md").read_text()
    assert text.startswith("# Memory\n\nSome prose.\n\n## Facts\n\n- The API listens on 8000 <!--")
    assert fact.lines == (7, 7)


def test_remember_same_text_twice_returns_the_existing_entry(ws: Workspace) -> None:
    one = ws.remember("Uses  PostgreSQL 16", type="fact")
    two = ws.remember("uses postgresql 16", type="fact")
    assert one.id == two.id
    assert len([e for e in ws.entries("memory.md")]) == 1


def test_remember_rejects_bad_values(ws: Workspace) -> None:
    with pytest.raises(ValueError, match="unknown memory type"):
        ws.remember("x", type="opinion")
    with pytest.raises(ValueError, match="between 0 and 1"):
        ws.remember("x", importance=2)
    with pytest.raises(ValueError, match="needs some text"):
        ws.remember("   ")
    with pytest.raises(ValueError, match="<!--"):
        ws.remember("sneaky <!-- mdmem id=x -->")


def test_multiline_memory_round_trips(ws: Workspace) -> None:
    entry = ws.remember("Deploy steps:\n1. build\n\n2. push", type="skill")
    again = ws.get(entry.id)
    assert again.text == "Deploy steps:\n1. build\n\n2. push"
    assert again.lines == entry.lines and entry.end_line - entry.start_line == 3


def test_update_changes_text_and_keeps_id(ws: Workspace) -> None:
    entry = ws.remember("Deploys go to Heroku", type="fact", importance=0.6)
    updated = ws.update(entry.id, "Deploys go to Fly.io", importance=0.7)
    assert updated.id == entry.id and updated.text == "Deploys go to Fly.io"
    assert updated.importance == 0.7 and updated.meta["updated"]
    assert updated.created == entry.created
    with pytest.raises(EntryNotFoundError):
        ws.update("m-doesnotexist", "x")


def test_update_of_a_hand_written_entry_gives_it_metadata(ws: Workspace) -> None:
    (ws.root / "memory.md").write_text("## Facts\n- written by hand\n- another\n")
    hand = ws.entries("memory.md")[0]
    updated = ws.update(hand.id, importance=0.9)
    assert updated.id == hand.id and updated.importance == 0.9
    assert (ws.root / "memory.md").read_text().endswith("\n- another\n")


def test_supersede_moves_the_old_entry_to_the_archive(ws: Workspace) -> None:
    old = ws.remember("Deploys go to Heroku", type="fact", importance=0.6)
    new = ws.supersede(old.id, by="Deploys go to Fly.io")
    assert new.type == "fact" and new.importance == 0.6
    active = [e.text for e in ws.entries("memory.md")]
    assert active == ["Deploys go to Fly.io"]
    archived = ws.get(old.id)
    assert archived.archived and archived.heading_path[-1] == "Archive"
    assert archived.meta["superseded_by"] == new.id and archived.meta["superseded"]
    assert archived.type == "fact"
    # superseding by an existing entry's id
    a = ws.remember("Python 3.11", type="fact")
    b = ws.remember("Python 3.12", type="fact")
    assert ws.supersede(a.id, by=b.id).id == b.id
    assert ws.get(a.id).meta["superseded_by"] == b.id


def test_a_persons_save_between_read_and_write_is_kept(ws: Workspace) -> None:
    """The edit is redone on the person's version, not applied over it."""
    path = ws.root / "memory.md"
    path.write_text("## Facts\n- one\n")
    saved = []

    def edit(text: str) -> str:
        if not saved:  # a person saves while mdmem is editing
            path.write_text("## Facts\n- one\n- added by a person\n")
            saved.append(True)
        return text + "- from mdmem\n"

    result = ws._w.writer.edit(Target(path, "memory.md"), edit)
    assert result.attempts == 2
    assert path.read_text() == "## Facts\n- one\n- added by a person\n- from mdmem\n"


def test_conflicting_human_edit_raises_and_keeps_the_human_text(ws: Workspace) -> None:
    entry = ws.remember("Deploys go to Heroku", type="fact")
    hand = ws.remember("Staging is on Render", type="fact")
    path = ws.root / "memory.md"
    seen, seen_hand = ws.get(entry.id), ws.get(hand.id)  # what the agent read
    human = path.read_text().replace("Heroku", "Render (changed by hand)")
    human = human.replace("- Staging is on Render <!--", "- Staging moved <!--")
    path.write_text(human)
    with pytest.raises(ConflictError, match="changed by someone else"):
        ws.update(seen, "Deploys go to Fly.io")
    with pytest.raises(ConflictError):
        ws.supersede(seen_hand, by="Staging is on Fly.io")
    assert path.read_text() == human
    # Without an expected entry the update applies to the current text: no conflict.
    assert ws.update(entry.id, importance=0.9).text == "Deploys go to Render (changed by hand)"


def test_writes_keep_permissions_and_crlf(ws: Workspace) -> None:
    path = ws.root / "memory.md"
    path.write_bytes(b"## Facts\r\n- one\r\n")
    os.chmod(path, 0o640)
    ws.remember("two", type="fact")
    assert path.read_bytes().startswith(b"## Facts\r\n- one\r\n- two <!-- mdmem")
    assert path.read_bytes().endswith(b"-->\r\n")
    assert (path.stat().st_mode & 0o777) == 0o640
    assert not [p for p in ws.root.iterdir() if p.name.endswith(".mdmem-tmp")]


class _PathLike:
    """An ``os.PathLike`` that is not a ``pathlib.Path`` (its ``str()`` is its repr)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __fspath__(self) -> str:
        return self.path


def test_a_path_like_other_than_path_names_its_file(ws: Workspace) -> None:
    """Found by mypy: paths were read with ``str(name)``, so ``ws.read`` / ``ws.entries`` of
    any ``os.PathLike`` but ``Path`` looked for a file named after the object's repr."""
    entry = ws.remember("We deploy with uv", type="fact")
    assert ws.files.read(_PathLike(entry.path)).path == entry.path
    assert [e.id for e in ws.entries(_PathLike(entry.path))] == [
        e.id for e in ws.entries(entry.path)
    ]
    with pytest.raises(UnsafePathError):
        ws.files.read(_PathLike("../outside.md"))
