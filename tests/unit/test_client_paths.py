"""mdmem/paths.py's resolver for names from clients, on its own: each class of trick the
MCP server, the memory tool and hook payloads are protected from, one pinned case each, and
the generated names of tests/hostile_paths.py straight against the function."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hostile_paths import benign_names, hostile_names
from hypothesis import given

from mdmem.errors import UnsafePathError
from mdmem.paths import RefusedPath, client_file, client_glob, client_name, client_path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "ws" / "out").symlink_to(tmp_path / "outside", target_is_directory=True)
    (tmp_path / "ws" / "in").symlink_to(tmp_path / "ws", target_is_directory=True)
    return tmp_path / "ws"


@pytest.mark.parametrize(
    ("name", "why", "escapes"),
    [
        ("/etc/passwd", "is an absolute path", True),
        ("\\etc\\passwd", "is an absolute path", True),
        ("~/x.md", "starts with '~'", True),
        ("~root/x.md", "starts with '~'", True),
        ("C:/x.md", "names a drive", True),
        ("../x.md", "holds '..'", True),
        ("a/../../x.md", "holds '..'", True),
        ("a\\..\\..\\x.md", "holds '..'", True),
        ("%2e%2e/x.md", "holds '..' once percent-escapes are decoded", True),
        ("..%2fx.md", "holds '..' once percent-escapes are decoded", True),
        ("%c0%ae%c0%ae/x.md", "not UTF-8 (an overlong encoding?)", True),
        ("a\0b.md", "embedded null byte", False),
        ("%00x.md", "embedded null byte", False),
        ("a\nb.md", "control character", False),
        ("a\udcffb.md", "not valid UTF-8", False),
        ("a\u202eb.md", "U+202E, an invisible or text-direction mark", False),
        ("a\u200bb.md", "U+200B", False),
        ("\ufeffx.md", "U+FEFF", False),
        ("a\uff0fb.md", "U+FF0F, a look-alike of '/'", True),
        ("a\uff3cb.md", "U+FF3C, a look-alike of '\\\\'", True),
        ("\uff0e\uff0e/x.md", "U+FF0E, a look-alike of '.'", True),
        ("\u2025/x.md", "U+2025, a look-alike of '..'", True),
        ("\uff5e/x.md", "U+FF5E, a look-alike of '~'", True),
        ("\u3002\u3002/x.md", "made of dots or look-alikes", True),
        ("...", "made of dots or look-alikes", True),
        ("memory.md.", "ends with a dot or a space", False),
        ("memory.md ", "ends with a dot or a space", False),
        ("notes /x.md", "ends with a dot or a space", False),
        ("out/secret.md", "leads outside the workspace", True),
        (".mdmem/index.db", "inside .mdmem/", False),
        ("a/.git/config", "inside .git/", False),
        ("", "is empty", False),
    ],
)
def test_each_trick_is_refused_naming_the_argument(
    root: Path, name: str, why: str, escapes: bool
) -> None:
    with pytest.raises(UnsafePathError) as caught:
        client_path(root, name, "source")
    message = str(caught.value)
    assert message.startswith("source ") and why in message, message
    assert len(message.splitlines()) == 1 and "\0" not in message
    if isinstance(caught.value, RefusedPath):
        assert caught.value.escapes is escapes, message


@pytest.mark.parametrize(
    ("name", "rel"),
    [
        ("memory.md", "memory.md"),
        ("./notes/today.md", "notes/today.md"),
        ("notes\\today.md", "notes/today.md"),  # a backslash separates folders
        ("café/メモ.md", "café/メモ.md"),
        ("cafe\u0301.md", "cafe\u0301.md"),  # decomposed: a name, no trick
        ("a b/c-d_e.md", "a b/c-d_e.md"),
        (".sessions/s.md", ".sessions/s.md"),
        ("in/x.md", "in/x.md"),  # a link that stays inside
        ("100%.md", "100%.md"),
    ],
)
def test_benign_names_resolve_inside(root: Path, name: str, rel: str) -> None:
    assert client_path(root, name, "path") == (rel, root / rel)


@pytest.fixture(scope="module")
def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One workspace folder (with its symlink out) for all generated examples."""
    base = tmp_path_factory.mktemp("client_paths")
    (base / "ws").mkdir()
    (base / "outside").mkdir()
    (base / "ws" / "out").symlink_to(base / "outside", target_is_directory=True)
    return base / "ws"


@given(name=hostile_names())
def test_generated_hostile_names_are_refused(shared_root: Path, name: str) -> None:
    with pytest.raises(UnsafePathError):
        client_path(shared_root, name, "path")


@given(name=benign_names(suffix=".md"))
def test_generated_benign_names_resolve_inside(shared_root: Path, name: str) -> None:
    rel, absolute = client_path(shared_root, name, "path")
    assert absolute == shared_root / rel and not rel.startswith(("/", "./"))
    assert Path(os.path.realpath(absolute)).is_relative_to(os.path.realpath(shared_root))


def test_a_glob_and_a_name_get_the_same_checks() -> None:
    assert client_glob("notes/**/*.md") == "notes/**/*.md"
    for pattern in ("/etc/*", "../*", ".mdmem/*", "\uff0f*"):
        with pytest.raises(UnsafePathError, match=r"^path "):
            client_glob(pattern)
    assert client_name("team-1", "pool") == "team-1"
    for name in ("a/b", "a\\b", "..", "x\u202e"):
        with pytest.raises(UnsafePathError, match=r"^pool "):
            client_name(name, "pool")


def test_a_hook_transcript_must_lie_under_an_allowed_root(tmp_path: Path) -> None:
    projects = tmp_path / "claude" / "projects"
    (projects / "p").mkdir(parents=True)
    log = projects / "p" / "s.jsonl"
    log.write_text("{}\n")
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text("{}\n")
    (projects / "p" / "link.jsonl").symlink_to(elsewhere)
    assert client_file(str(log), [projects], "transcript_path") == log
    for path in (
        str(elsewhere),
        str(projects / "p" / "link.jsonl"),  # followed: it is elsewhere
        f"{projects}/../../elsewhere.jsonl",
        "p/s.jsonl",
        f"{log}\0",
        f"{projects}/p/s\u202e.jsonl",
    ):
        with pytest.raises(UnsafePathError, match=r"^transcript_path "):
            client_file(path, [projects], "transcript_path")
