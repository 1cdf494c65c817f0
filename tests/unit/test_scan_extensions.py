"""The default ``files.include`` selects Markdown files whatever the case of their extension:
``NOTES.MD`` (as some editors and other systems save it) was not indexed, because the default
``**/*.md`` was matched case-sensitively. Patterns a user writes keep gitignore's rules."""

from __future__ import annotations

from pathlib import Path

from mdmem import Workspace
from mdmem.config import FilesConfig
from mdmem.memory.scan import include_spec, included, scan


def _keyword_ws(root: Path) -> Workspace:
    Workspace.init(root, mode="minimal", agent="a")
    (root / "mdmem.toml").write_text('mode = "minimal"\nagent = "a"\n[embedding]\nmodel = ""\n')
    return Workspace.open(root)


def test_an_upper_case_extension_is_indexed_and_searched(tmp_path: Path) -> None:
    ws = _keyword_ws(tmp_path / "ws")
    (ws.root / "NOTES.MD").write_text("# Notes\n\n- The staging port is 5433\n")
    (ws.root / "docs").mkdir()
    (ws.root / "docs" / "Plan.Md").write_text("# Plan\n\n- Ship the quokka release\n")
    (ws.root / "notes.markdown.txt").write_text("not markdown\n")
    paths = {f.path for f in scan(ws.root, ws.config.files).files}
    assert {"NOTES.MD", "docs/Plan.Md"} <= paths
    assert "notes.markdown.txt" not in paths
    assert [h.path for h in ws.search("staging port 5433", k=3)][:1] == ["NOTES.MD"]
    assert [h.path for h in ws.search("quokka release", k=3)][:1] == ["docs/Plan.Md"]
    assert ws.files.read("NOTES.MD").entries  # read as any Markdown file


def test_the_default_include_and_a_users_patterns() -> None:
    default = include_spec(FilesConfig())
    for name in ("a.md", "A.MD", "x/b.Md", "x/c.mD"):
        assert included(name, default), name
    for name in ("a.mdx", "a.txt", "md", "a.m d"):
        assert not included(name, default), name
    written = include_spec(FilesConfig(include=("**/*.md", "**/*.txt")))
    assert included("a.md", written) and included("b.txt", written)
    assert not included("A.MD", written)  # a user's pattern matches as gitignore does
