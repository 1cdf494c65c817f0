"""A team of agents on one memory: a researcher and a writer in one workspace, and a child
agent whose workspace has the team's as its parent.

    python examples/team.py PATH     (PATH: an empty folder; the GLOBAL workspace goes in
                                      PATH/global unless $MDMEM_GLOBAL says otherwise)

The agents are scripted (no LLM), so the run is deterministic and offline; everything they
write lands in readable Markdown files under PATH.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mdmem import PoolEntry, ScopeError, VersionConflict, Workspace
from mdmem.index.embed import Embedder


def team_at_work(team: Workspace) -> None:
    """The researcher finds, the writer drafts: both through the team's shared pool."""
    print(f"== the team: {team.root}")
    pool = team.sharing.pool("plan")
    pool.on_write(lambda e: print(f"   pool: {e.key} v{e.version} by {e.updated_by}"))
    with team.session("Size the EU market", agent="researcher") as s:
        s.event("finding", "EU demand for invoice tooling grows 12% a year")
        pool.write("market", {"region": "EU", "growth": 0.12, "sources": 3}, writer="researcher")
    team.remember("Invoice tooling demand in the EU grows 12% a year (3 sources)", type="fact")
    seen = pool.read("market")
    assert seen is not None
    with team.session("Draft the market note", agent="writer") as s:
        s.event("planning", f"draft from market v{seen.version}")
        pool.write("draft", "EU demand grows 12% a year.", writer="writer", expected_version=0)
    # the researcher revises while the writer still holds v1: the writer's update conflicts
    pool.write("market", {**seen.content, "growth": 0.14, "sources": 4}, writer="researcher")
    try:
        pool.write("market", {**seen.content, "note": "cited"}, "writer", expected_version=seen)
    except VersionConflict as exc:
        print(f"   writer: conflict on {exc.key!r} (expected v{exc.expected}, found "
              f"v{exc.actual}); reads again")  # fmt: skip
        fresh = pool.read("market")
        assert fresh is not None
        pool.write("market", {**fresh.content, "note": "cited"}, "writer", expected_version=fresh)
    team.index.update()


def child_agent(child: Workspace, team: Workspace) -> None:
    """A child agent reads the team's memory (INHERITED), pulls its plan, hands a result up."""
    print(f"== the child agent: {child.root} (parent: {team.root})")
    child.sharing.pool("plan").write("draft", "Start with the growth figure.", writer="summariser")
    for hit in child.search("how fast does EU demand grow", k=2):
        print(f"   {hit.scope:<9} {Path(hit.workspace or '').name}/{hit.citation}  {hit.text[:60]}")
    report = child.sharing.sync_from_parent()
    for pulled in report.pulled:
        print(f"   sync_from_parent: {pulled.pool}/{pulled.key} {pulled.action}")
    draft = child.sharing.pool("plan").read("draft")
    assert draft is not None
    print(f"   merged draft: {draft.content!r}, parent's kept as a note: "
          f"{draft.metadata.get('parent_note')!r}")  # fmt: skip
    entry: PoolEntry = child.sharing.publish(
        "summary", "EU demand: +14% a year (4 sources)", pool="plan"
    )
    print(f"   published to the parent: plan/{entry.key} v{entry.version} by {entry.updated_by}")
    try:
        child.sharing.publish("summary", "unchecked guess", pool="plan", writer="intern")
    except ScopeError as exc:
        print(f"   refused: {exc}")


def global_preferences(child: Workspace, model: Embedder | None) -> None:
    """GLOBAL: the user's preferences, read by every workspace."""
    home = Workspace.open_global(embedder=model)
    print(f"== GLOBAL: {home.root}")
    home.remember("The user wants British spelling in everything written", type="preference")
    home.index.update()
    hit = child.search("which spelling should the summary use", k=1)[0]
    print(f"   {hit.scope:<9} {hit.text}")
    context = child.build_context("write the EU summary", budget_tokens=400)
    print("   the child's prompt memory, inherited and GLOBAL lines:")
    for line in context.text.splitlines():
        if "(inherited " in line or "(global " in line:
            print(f"     {line[:110]}")


def main(path: Path, model: Embedder | None = None) -> None:
    path.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MDMEM_GLOBAL", str(path / "global"))
    team = Workspace.init(path / "team", agent="researcher")
    team = Workspace.open(team.root, embedder=model or team.index.embedder())
    model = team.index.embedder()
    child_root = path / "child"
    Workspace.init(child_root, agent="summariser")
    config = child_root / "mdmem.toml"
    config.write_text(
        'parent = "../team"\n' + config.read_text() + '\n[scopes]\npublish = ["summariser"]\n'
        '\n[scopes.resolvers]\nplan = "merge"\n'
    )
    child = Workspace.open(child_root, embedder=model)
    team_at_work(team)
    child_agent(child, team)
    global_preferences(child, model)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
