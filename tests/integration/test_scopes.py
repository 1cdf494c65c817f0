"""Scopes, parents, GLOBAL, the write policy and resolvers (issue 13 §1, §3): real workspaces,
real indexes, the real model, a real second process."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mdmem import ConfigError, ParentCycleError, ScopeError, Workspace
from mdmem.index.federated import one_scale
from mdmem.index.search import Hit, Scores

BIN = Path(sys.executable).parent / "mdmem"


def _make(root: Path, parent: str = "", agent: str = "default", extra: str = "") -> Workspace:
    Workspace.init(root, mode="full", agent=agent)
    if parent or extra:
        text = (root / "mdmem.toml").read_text()
        # top-level keys go before the first table
        top = f'parent = "{parent}"\n' if parent else ""
        (root / "mdmem.toml").write_text(top + text + extra)
    return Workspace.open(root)


def _digest(root: Path) -> dict[str, str]:
    """The hash of a workspace's index and its write-ahead log: the index untouched or not."""
    state = root / ".mdmem"
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (state / "index.db", state / "index.db-wal")
        if p.exists() and p.stat().st_size  # (a reader may create an empty log)
    }


@pytest.fixture
def chain(tmp_path: Path, embedder) -> tuple[Workspace, Workspace, Workspace]:
    """team (grandparent) ← project (parent) ← child, each indexed by its own workspace."""
    team = _make(tmp_path / "team")
    team.remember("Releases ship on Thursdays after the changelog is reviewed", type="fact")
    with team.session("private musings", agent="lead") as s:
        s.event("note", "The lead privately thinks Thursday releases are risky")
    project = _make(tmp_path / "project", parent="../team")
    project.remember("Invoice numbers look like INV-2026-0042", type="fact")
    child = _make(tmp_path / "child", parent="../project", agent="writer")
    child.remember("The writer drafts the weekly customer newsletter", type="fact")
    for ws in (team, project):
        with Workspace.open(ws.root, embedder=embedder) as own:
            own.index.update()
    return (
        Workspace.open(team.root, embedder=embedder),
        Workspace.open(project.root, embedder=embedder),
        Workspace.open(child.root, embedder=embedder),
    )


def test_a_child_searches_its_parent_chain_on_one_scale_without_touching_their_indexes(
    chain: tuple[Workspace, Workspace, Workspace],
) -> None:
    team, project, child = chain
    before = {ws.root: _digest(ws.root) for ws in (team, project)}
    results = child.search("when do releases ship")
    top = results[0]
    assert top.text.startswith("Releases ship on Thursdays")
    assert (top.scope, top.workspace, top.path) == ("INHERITED", str(team.root), "memory.md")
    data = results.to_dict()["hits"][0]
    assert (data["scope"], data["workspace"]) == ("INHERITED", str(team.root))
    # a parent's LOCAL memory (its sessions) is never inherited
    assert not any("privately" in h.text for h in child.search("Thursday releases risky", k=20))
    hit = child.search("invoice number format", k=1)[0]
    assert (hit.scope, hit.workspace) == ("INHERITED", str(project.root))
    # one scale: the child's own answer outranks the parents' best-of-their-own passages
    ranked = child.search("weekly newsletter", k=10, track_access=False)
    own = ranked[0]
    assert (own.scope, own.workspace) == ("SHARED", str(child.root))
    assert own.scores.relevance == 1.0
    assert all(h.scores.relevance < 1.0 for h in ranked[1:])
    assert results.fresh and not results.problems
    assert {ws.root: _digest(ws.root) for ws in (team, project)} == before  # read-only
    # the scope filter
    only = child.search("releases invoices newsletter", k=10, scopes=["shared"])
    assert only and {h.scope for h in only} == {"SHARED"}
    inherited = child.search("releases invoices newsletter", k=10, scopes="inherited")
    assert inherited and {h.workspace for h in inherited} <= {str(team.root), str(project.root)}
    with pytest.raises(ValueError, match="scopes are local, shared, inherited, global"):
        child.search("x", scopes=["parents"])


def test_a_stale_parent_is_searched_as_it_is_and_reported(
    chain: tuple[Workspace, Workspace, Workspace],
) -> None:
    team, _, child = chain
    before = _digest(team.root)
    memory = team.root / "memory.md"
    memory.write_text(memory.read_text() + "- Hotfixes may ship any day\n")
    results = child.search("when do releases ship")
    assert results[0].scope == "INHERITED"
    assert results[0].text.startswith("Releases ship on Thursdays")  # from its files
    assert str(memory) in results.stale
    assert any(
        f"{team.root} is stale: 1 file(s)" in p and "those files were searched directly" in p
        for p in results.problems
    )
    # issue 32 §3: the changed file is searched in the file itself, not as it was indexed
    hotfix = child.search("hotfixes ship any day", k=3, mode="keyword")
    assert hotfix[0].text == "Hotfixes may ship any day"
    assert "Hotfixes may ship any day" in [h.text for h in child.search("hotfixes", k=5)]
    assert (hotfix[0].scope, hotfix[0].workspace) == ("INHERITED", str(team.root))
    assert _digest(team.root) == before  # the child never re-indexes its parent


def test_context_includes_the_parents_knowledge_labelled(
    chain: tuple[Workspace, Workspace, Workspace],
) -> None:
    team, _, child = chain
    text = child.build_context("when do releases ship", budget_tokens=800).text
    assert "Releases ship on Thursdays" in text
    assert f"inherited {team.root}/memory.md:" in text
    assert "The writer drafts the weekly customer newsletter" in text


def test_a_parent_cycle_is_an_error_naming_it(tmp_path: Path) -> None:
    _make(tmp_path / "a", parent="../b")
    _make(tmp_path / "b", parent="../c")
    c = _make(tmp_path / "c", parent="../a")
    with pytest.raises(ParentCycleError) as caught:
        c.search("anything", mode="keyword")
    a, b, cc = (str((tmp_path / n).resolve()) for n in "abc")
    assert str(caught.value) == f"parent workspaces form a cycle: {cc} -> {a} -> {b} -> {cc}"
    lone = _make(tmp_path / "lone", parent="../nowhere")
    with pytest.raises(ConfigError, match=r"mdmem.toml: parent = '../nowhere': no folder at"):
        lone.sharing.parent()
    result = subprocess.run(
        [str(BIN), "-w", str(tmp_path / "c"), "search", "x", "--no-server", "--mode", "keyword"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "parent workspaces form a cycle:" in result.stderr and "Traceback" not in result.stderr


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def test_a_parent_without_an_index_is_searched_in_its_files(tmp_path: Path) -> None:
    """Issue 32 §3: a parent just made, with no index yet, was not searched at all. Its files
    are searched directly (by keyword, through a mirror in the child's .mdmem/), and the
    parent's folder is left exactly as it was."""
    parent = _make(tmp_path / "p")
    parent.remember("Llamas hum when they are curious", type="fact")
    with parent.session("private musings", agent="lead") as s:
        s.event("note", "The lead privately suspects llamas of plotting")
    parent.close()  # its own background promotion writes .mdmem/promote.json; only the child's acts count
    child = _make(tmp_path / "c", parent="../p")
    child.remember("Llamas are calm animals", type="fact")
    before = _tree(tmp_path / "p")
    results = child.search("llamas hum curious", mode="keyword")
    assert (results[0].scope, results[0].workspace) == ("INHERITED", str(parent.root))
    assert results[0].text == "Llamas hum when they are curious"
    assert results[0].citation.startswith("memory.md:")
    assert [h.scope for h in results] == ["INHERITED", "SHARED"]
    assert any(
        f"{parent.root} has no index yet; its files were searched directly, by keyword only" in p
        for p in results.problems
    )
    assert _tree(tmp_path / "p") == before  # the child made or touched nothing there
    assert not child.search("privately suspects plotting", mode="keyword")  # LOCAL stays
    parent.remember("Alpacas spit when annoyed", type="fact")  # the next search sees it
    parent.close()
    before = _tree(tmp_path / "p")
    assert child.search("alpacas spit", mode="keyword")[0].text == "Alpacas spit when annoyed"
    assert _tree(tmp_path / "p") == before
    assert not (tmp_path / "p" / ".mdmem" / "index.db").exists()
    # a file too big to read for one search is left to the parent's index, and named
    (tmp_path / "p" / "dump.md").write_text("# Dump\n\n" + "llama wool data\n" * 140_000)
    results = child.search("alpacas spit", mode="keyword")
    assert results[0].text == "Alpacas spit when annoyed"
    assert any("dump.md" in p and "too big" in p for p in results.problems)


def test_the_scope_policy_refuses_and_allows_publishing(
    tmp_path: Path, embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDMEM_GLOBAL", str(tmp_path / "global"))
    team = _make(tmp_path / "team", extra='\n[scopes]\naccept = ["researcher"]\n')
    child = _make(
        tmp_path / "child",
        parent="../team",
        agent="writer",
        extra='\n[scopes]\npublish = ["researcher", "writer"]\nglobal_writers = []\n',
    )
    child = Workspace.open(child.root, embedder=embedder)
    with pytest.raises(ScopeError, match=r"agent 'writer' may not write INHERITED knowledge: .*"):
        child.sharing.publish("draft", "a first draft")
    assert "scopes.accept = ['researcher']" in str(_refusal(child, "draft", writer="writer"))
    with pytest.raises(ScopeError, match=r"may not write INHERITED.*scopes.publish is"):
        child.sharing.publish("x", "y", writer="intern")
    with pytest.raises(ScopeError, match=r"may not write GLOBAL knowledge.*global_writers = \[\]"):
        child.sharing.publish("pref", "tabs", to="global")
    assert not (team.root / "shared").exists()  # nothing written anywhere
    assert not Path(os.environ["MDMEM_GLOBAL"]).exists()  # a refused publish creates nothing
    entry = child.sharing.publish("finding", {"market": "EU", "size": 3}, writer="researcher")
    assert (entry.version, entry.created_by, entry.metadata["from"]) == (
        1,
        "researcher",
        str(child.root),
    )
    assert team.sharing.pool().read("finding").content == {"market": "EU", "size": 3}
    hit = child.search("finding market EU", k=1)[0]  # the parent's index took it in
    assert (hit.scope, hit.path) == ("INHERITED", "shared/default.md")
    with pytest.raises(ValueError, match='publish to "parent" or "global"'):
        child.sharing.publish("x", "y", to="sibling", writer="researcher")


def _refusal(ws: Workspace, key: str, writer: str) -> ScopeError:
    try:
        ws.sharing.publish(key, "text", writer=writer)
    except ScopeError as exc:
        return exc
    raise AssertionError("not refused")


def test_an_agent_may_not_write_another_agents_private_notes(tmp_path: Path) -> None:
    """LOCAL: .notes/<agent>/ is that agent's; the refusal writes nothing."""
    own = Workspace.init(tmp_path / "w", agent="writer")
    own.remember("Drafts go through two reviews", file=".notes/writer/habits.md")
    other = Workspace(own.root, dataclasses.replace(own.config, agent="researcher"))
    before = (tmp_path / "w" / ".notes" / "writer" / "habits.md").read_bytes()
    with pytest.raises(ScopeError, match=r"'researcher' may not write \.notes/writer/habits\.md"):
        other.remember("Drafts need no review", file=".notes/writer/habits.md")
    with pytest.raises(ScopeError, match="LOCAL memory of agent 'writer'"):
        other.files.edit(".notes/writer/new.md", "- a note")
    assert (tmp_path / "w" / ".notes" / "writer" / "habits.md").read_bytes() == before
    assert not (tmp_path / "w" / ".notes" / "writer" / "new.md").exists()
    other.remember("Sources go in the footnotes", file=".notes/researcher/habits.md")
    other.remember("Shared: the style guide is in docs/", file="memory.md")  # SHARED: anyone


def test_global_preferences_are_seen_from_two_workspaces(
    tmp_path: Path, embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "user-data" / "global"
    monkeypatch.setenv("MDMEM_GLOBAL", str(home))
    one = _make(tmp_path / "one")
    two = _make(tmp_path / "two", extra="")
    assert one.search("spelling", mode="keyword") == []  # no GLOBAL yet: nothing, no error
    assert not home.exists()
    one = Workspace.open(one.root, embedder=embedder)
    one.sharing.publish("spelling", "Always write British English (colour, organise)", to="global")
    assert (home / "mdmem.toml").exists()  # created on first use
    g = Workspace.open_global(embedder=embedder)
    g.remember("The user prefers metric units in every answer", type="preference")
    g.index.update()
    for ws in (one, Workspace.open(two.root, embedder=embedder)):
        hit = ws.search("which units should answers use", k=1)[0]
        assert (hit.scope, hit.workspace) == ("GLOBAL", str(home.resolve()))
        assert "metric units" in hit.text
        hit = ws.search("British or American spelling", k=1)[0]
        assert (hit.scope, hit.path) == ("GLOBAL", "shared/default.md")
        assert "metric units" in ws.build_context("units for answers", budget_tokens=500).text
    (home / "mdmem.toml").write_text("mode = [\n")  # broken: no workspace's search breaks
    assert one.search("which units should answers use", k=1)[0].scope == "GLOBAL"
    off = two.root / "mdmem.toml"
    off.write_text(off.read_text() + "\n[scopes]\nread_global = false\n")
    assert Workspace.open(two.root).search("metric units", mode="keyword") == []


GRANDPARENT_WRITES = textwrap.dedent(
    """
    import sys
    from mdmem import Workspace
    pool = Workspace(sys.argv[1]).sharing.pool("plan")
    for key, value in [
        ("budget", {"currency": "EUR", "limits": {"travel": 100, "food": 30}}),
        ("tone", "Formal, short sentences"),
        ("deadline", "2026-12-01"),
    ]:
        pool.write(key, value, writer="lead")
    """
)


def test_resolvers_down_a_three_level_chain(tmp_path: Path) -> None:
    team = _make(tmp_path / "team")
    project = _make(
        tmp_path / "project", parent="../team", extra='\n[scopes.resolvers]\nplan = "parent-wins"\n'
    )
    child = _make(
        tmp_path / "child",
        parent="../project",
        agent="writer",
        extra='\n[scopes.resolvers]\nplan = "merge"\n"*" = "child-wins"\n',
    )
    # another process (the team's lead agent) writes the team's plan
    subprocess.run(
        [sys.executable, "-c", GRANDPARENT_WRITES, str(team.root)], check=True, timeout=60
    )
    project.sharing.pool("plan").write("deadline", "2026-11-15", writer="pm")  # to be overruled
    first = project.sharing.sync_from_parent()
    assert {(p.key, p.action) for p in first.pulled} == {
        ("budget", "added"),
        ("tone", "added"),
        ("deadline", "replaced"),
    }
    assert project.sharing.pool("plan").read("deadline").content == "2026-12-01"
    assert project.sharing.sync_from_parent().changed == []  # nothing newer: nothing written

    child.sharing.pool("plan").write("budget", {"limits": {"food": 45}, "owner": "writer"})
    child.sharing.pool("plan").write("tone", "Friendly")
    child.sharing.pool("notes").write("n1", "the child's own")
    report = child.sharing.sync_from_parent()
    assert {(p.key, p.action) for p in report.changed} == {
        ("budget", "merged"),
        ("tone", "merged"),
        ("deadline", "added"),
    }
    plan = child.sharing.pool("plan")
    assert plan.read("budget").content == {
        "currency": "EUR",
        "limits": {"travel": 100, "food": 45},
        "owner": "writer",
    }
    tone = plan.read("tone")
    assert tone.content == "Friendly"  # text: the child's value wins …
    assert tone.metadata["parent_note"] == "Formal, short sentences"  # … the parent's is kept
    assert tone.metadata["parent_version"] == 1
    assert child.sharing.sync_from_parent().changed == []

    # the team changes its tone: it reaches the project (parent wins), then the child (merge)
    Workspace.open(team.root).sharing.pool("plan").write("tone", "Formal, no jargon", writer="lead")
    assert [(p.key, p.action) for p in project.sharing.sync_from_parent().changed] == [
        ("tone", "replaced")
    ]
    again = child.sharing.sync_from_parent()
    assert [(p.key, p.action, p.parent_version) for p in again.changed] == [("tone", "merged", 2)]
    assert plan.read("tone").metadata["parent_note"] == "Formal, no jargon"
    assert json.loads(json.dumps(again.to_dict()))["parent"] == str(project.root)
    with pytest.raises(ConfigError, match="no parent to sync from"):
        team.sharing.sync_from_parent()


def test_a_bad_resolver_name_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"scopes.resolvers: .*parent-wins, child-wins, merge"):
        _make(tmp_path / "ws", extra='\n[scopes.resolvers]\nplan = "newest"\n')


def _hit(text: str, keyword: float | None, vector: float, relevance: float = 1.0) -> Hit:
    scores = Scores(keyword, vector, relevance, recency=1.0, importance=0.5, frequency=0.0)
    return Hit("memory.md", 1, 1, "", text, 0.0, scores, "fact", 0.5, None, text, "fact")


def test_one_scale_does_not_lift_a_workspaces_weak_best() -> None:
    """Each workspace scaled alone gives its best hit relevance 1; on one scale a parent whose
    best passage is a weak match stays below the child's strong one (and under the floor)."""
    from mdmem.config import SearchConfig

    child = [_hit("strong", keyword=12.0, vector=0.82), _hit("ok", keyword=6.0, vector=0.6)]
    parent = [_hit("weak", keyword=1.0, vector=0.2)]
    ranked = one_scale([child, parent], SearchConfig(), "hybrid")
    assert [h.text for h in ranked] == ["strong", "ok"]
    assert ranked[0].scores.relevance == 1.0
    assert 0.5 < ranked[1].scores.relevance < 0.8
    parent = [_hit("better", keyword=20.0, vector=0.9)]
    assert one_scale([child, parent], SearchConfig(), "hybrid")[0].text == "better"


def test_the_team_example_runs(
    tmp_path: Path, embedder, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/team.py (run by `make demo`): two agents, a child with a parent, GLOBAL."""
    import importlib.util

    monkeypatch.setenv("MDMEM_GLOBAL", str(tmp_path / "global"))
    spec = importlib.util.spec_from_file_location(
        "team", Path(__file__).parents[2] / "examples" / "team.py"
    )
    assert spec is not None and spec.loader is not None
    team = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(team)
    team.main(tmp_path / "demo", embedder)
    out = capsys.readouterr().out
    assert "writer: conflict on 'market' (expected v1, found v2); reads again" in out
    assert "sync_from_parent: plan/draft merged" in out
    assert "published to the parent: plan/summary v1 by summariser" in out
    assert "refused: agent 'intern' may not write INHERITED knowledge" in out
    assert "GLOBAL    The user wants British spelling" in out
    summary = Workspace.open(tmp_path / "demo" / "team").sharing.pool("plan").read("summary")
    assert summary is not None and summary.updated_by == "summariser"


# ---- issue 32 §3: the merge resolver is a three-way merge against the value last taken ----


def test_merge_takes_the_parents_second_change_too(tmp_path: Path) -> None:
    """The issue's reproduction: the second sync reported `kept` and left EUR / 100."""
    team = _make(tmp_path / "team")
    child = _make(
        tmp_path / "child", parent="../team", extra='\n[scopes.resolvers]\nplan = "merge"\n'
    )
    plan = team.sharing.pool("plan")
    plan.write("budget", {"currency": "EUR", "limits": {"travel": 100}}, writer="lead")
    child.sharing.pool("plan").write("budget", {"limits": {"food": 30}})
    first = child.sharing.sync_from_parent()
    assert [(p.key, p.action) for p in first.changed] == [("budget", "merged")]
    want = {"currency": "EUR", "limits": {"travel": 100, "food": 30}}
    assert child.sharing.pool("plan").read("budget").content == want
    plan.write("budget", {"currency": "USD", "limits": {"travel": 200}}, writer="lead")
    second = child.sharing.sync_from_parent()
    assert [(p.key, p.action, p.parent_version) for p in second.pulled] == [("budget", "merged", 2)]
    budget = child.sharing.pool("plan").read("budget")
    assert budget.content == {"currency": "USD", "limits": {"travel": 200, "food": 30}}
    # the child changes a leaf the parent also changes next: the child's own change wins
    child.sharing.pool("plan").write("budget", {**budget.content, "currency": "GBP"})
    plan.write("budget", {"currency": "CHF", "limits": {"travel": 250}}, writer="lead")
    child.sharing.sync_from_parent()
    assert child.sharing.pool("plan").read("budget").content == {
        "currency": "GBP",
        "limits": {"travel": 250, "food": 30},
    }
    # a parent change the child already made itself is taken (`kept`), and the next one too
    child.sharing.pool("plan").write(
        "budget", {"currency": "GBP", "limits": {"travel": 300, "food": 30}}
    )
    plan.write("budget", {"currency": "CHF", "limits": {"travel": 300}}, writer="lead")
    kept = child.sharing.sync_from_parent()
    assert [(p.key, p.action) for p in kept.pulled] == [("budget", "kept")]
    plan.write("budget", {"currency": "CHF", "limits": {"travel": 350}}, writer="lead")
    child.sharing.sync_from_parent()
    assert child.sharing.pool("plan").read("budget").content["limits"] == {
        "travel": 350,
        "food": 30,
    }
    assert child.sharing.sync_from_parent().pulled == ()  # nothing newer: nothing read or written


LEAF = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([1.0, True, False, None, "EUR", "USD", "", [1, 2], []]),
)
LEAF_KEYS = st.sampled_from(["a", "b", "c"])
TREE_KEYS = st.sampled_from(["d", "e"])
"""A key names a leaf or a dict, never both: a leaf-by-leaf comparison needs each path to be one
or the other (a leaf turned dict is checked by example below)."""


def _trees(depth: int = 2) -> st.SearchStrategy[dict]:
    leaves = st.dictionaries(LEAF_KEYS, LEAF, max_size=3)
    if depth == 0:
        return leaves
    return st.tuples(leaves, st.dictionaries(TREE_KEYS, _trees(depth - 1), max_size=2)).map(
        lambda pair: {**pair[0], **pair[1]}
    )


def _edited(draw: st.DrawFn, tree: dict, depth: int = 2) -> dict:
    """``tree`` with some leaves changed, some keys deleted and some added, as one side edits
    the value it took."""
    out: dict = {}
    for key, value in tree.items():
        what = draw(st.sampled_from(["keep", "keep", "delete", "change"]))
        if what == "keep":
            out[key] = value
        elif what == "change":
            out[key] = _edited(draw, value, depth - 1) if isinstance(value, dict) else draw(LEAF)
    for key in draw(st.lists(LEAF_KEYS, max_size=2)):
        out.setdefault(key, draw(LEAF))
    if depth > 0:
        for key in draw(st.lists(TREE_KEYS, max_size=1)):
            out.setdefault(key, draw(_trees(depth - 1)))
    return out


@st.composite
def _three_way(draw: st.DrawFn) -> tuple[dict, dict, dict]:
    base = draw(_trees())
    return base, _edited(draw, base), _edited(draw, base)


def _leaves(value: object, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], str]:
    """Every leaf by its path, as JSON (``1``, ``1.0`` and ``true`` apart); empty dicts hold none."""
    if isinstance(value, dict):
        return {p: v for key, item in value.items() for p, v in _leaves(item, (*path, key)).items()}
    return {path: json.dumps(value)}


@given(_three_way())
@example(
    (
        {"currency": "EUR", "limits": {"travel": 100}},
        {"currency": "USD", "limits": {"travel": 200}},
        {"currency": "EUR", "limits": {"travel": 100, "food": 30}},
    )
)
@example(({"d": {"a": 1}}, {}, {"d": {"a": 2}}))  # deleted there, changed here: the change
@example(({"a": 1}, {"a": 1.0}, {"a": True}))  # three different values, not one
def test_merge_is_three_way_leaf_by_leaf(trees: tuple[dict, dict, dict]) -> None:
    """The child's value wins on exactly the leaves it changed since it last took the parent's
    value; every other leaf is the parent's now (a leaf either deleted is gone)."""
    from mdmem.sharing.resolvers import Merge, merge3

    base, parent, child = trees
    merged = Merge().resolve(parent, child, base).content
    assert merged == merge3(base, parent, child)
    b, p, c = _leaves(base), _leaves(parent), _leaves(child)
    want = {}
    for path in {*b, *p, *c}:
        leaf = p.get(path) if c.get(path) == b.get(path) else c.get(path)
        if leaf is not None:
            want[path] = leaf
    assert _leaves(merged) == want
    assert merge3(base, parent, base) == parent and merge3(base, base, child) == child


def test_merge_keeps_the_childs_change_of_a_leaf_into_a_dict_and_notes_text() -> None:
    from mdmem.sharing.resolvers import MISSING, Merge, merge3

    base = {"limits": 100, "owner": "lead"}
    parent = {"limits": 150, "owner": "pm"}
    child = {"limits": {"travel": 100}, "owner": "lead"}
    assert merge3(base, parent, child) == {"limits": {"travel": 100}, "owner": "pm"}
    assert Merge().resolve("short", "Friendly", "Formal").note == "short"
    assert Merge().resolve("short", "Formal", "Formal").content == "short"  # child unchanged
    assert Merge().resolve("Formal", "Friendly", "Formal").note is None  # parent unchanged
    assert Merge().resolve({"a": 1}, {"b": 2}, MISSING).content == {"a": 1, "b": 2}


PARENT_AGENT = """
import sys
from mdmem import Workspace
pool = Workspace(sys.argv[1]).sharing.pool("plan")
for travel in (150, 160, 170, 180, 200):
    pool.write("budget", {"currency": "USD", "limits": {"travel": travel}}, writer="lead")
"""


@pytest.mark.slow
def test_a_parent_two_children_and_global(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32 §3 as a user meets it: a parent just made (no index), two children with
    different resolvers, GLOBAL with no index either, the parent's agent (another process)
    writing the plan five times while a child watches, then both children syncing twice."""
    monkeypatch.setenv("MDMEM_GLOBAL", str(tmp_path / "global"))
    team = _make(tmp_path / "team", agent="lead")
    team.remember("Releases ship on Thursdays after the changelog review", type="fact")
    team.sharing.pool("plan").write("budget", {"currency": "EUR", "limits": {"travel": 100}})
    a = _make(
        tmp_path / "a",
        parent="../team",
        agent="writer",
        extra='\n[scopes.resolvers]\nplan = "merge"\n',
    )
    b = _make(
        tmp_path / "b", parent="../team", extra='\n[scopes.resolvers]\nplan = "parent-wins"\n'
    )
    me = Workspace.open_global()
    me.remember("The user writes British English", type="preference")
    for child in (a, b):
        found = child.search("releases thursdays changelog", mode="keyword", k=3)
        assert (found[0].scope, found[0].workspace) == ("INHERITED", str(team.root))
        spelling = child.search("british english", mode="keyword", k=3)
        assert spelling[0].scope == "GLOBAL"
        assert sum("searched directly" in p for p in found.problems) == 2  # team and GLOBAL
    assert not (team.root / ".mdmem" / "index.db").exists()

    a.sharing.pool("plan").write("budget", {"limits": {"food": 30}})
    b.sharing.pool("plan").write("budget", {"limits": {"food": 99}})
    assert [p.action for p in a.sharing.sync_from_parent().pulled] == ["merged"]
    assert [p.action for p in b.sharing.sync_from_parent().pulled] == ["replaced"]

    events: list = []
    watched = Workspace.open(team.root).sharing.pool("plan")
    watched.on_write(events.append)
    with watched.watch():
        subprocess.run([sys.executable, "-c", PARENT_AGENT, str(team.root)], check=True, timeout=60)
        deadline = time.monotonic() + 10
        while not any(e.version == 6 for e in events) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert [v for e in events for v in (*e.skipped, e.version)] == [2, 3, 4, 5, 6]

    assert [(p.action, p.parent_version) for p in a.sharing.sync_from_parent().pulled] == [
        ("merged", 6)
    ]
    assert a.sharing.pool("plan").read("budget").content == {
        "currency": "USD",
        "limits": {"travel": 200, "food": 30},
    }
    assert [(p.action, p.parent_version) for p in b.sharing.sync_from_parent().pulled] == [
        ("replaced", 6)
    ]
    assert b.sharing.pool("plan").read("budget").content == {
        "currency": "USD",
        "limits": {"travel": 200},
    }
    assert (
        a.sharing.sync_from_parent().pulled == b.sharing.sync_from_parent().pulled == ()
    )  # nothing newer

    Workspace.open(team.root).index.update(
        embed=False
    )  # the team's own index: then read from it, no problem
    found = a.search("releases thursdays changelog", mode="keyword", k=3, scopes=["inherited"])
    assert found[0].workspace == str(team.root) and not any(
        str(team.root) in p for p in found.problems
    )
