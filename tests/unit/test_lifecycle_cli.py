"""ws.lifecycle.stats() and the lifecycle commands as a user runs them: consolidate, restore, related,
stats, search --explain (through typer's CliRunner, `tests/in_process.py`; no embedding model)."""

from __future__ import annotations

import json

from in_process import mdmem as run

from mdmem import Workspace


def _keyword_only(ws: Workspace, extra: str = "") -> Workspace:
    path = ws.root / "mdmem.toml"
    path.write_text(path.read_text() + f'\n[embedding]\nmodel = ""\n{extra}')
    return Workspace(ws.root)


def test_stats_counts_archives_access_and_latency(ws: Workspace) -> None:
    ws = _keyword_only(ws)
    a = ws.remember("Deploys go to Fly.io", importance=0.8)
    ws.remember("User prefers short answers", type="preference", importance=0.4)
    ws.supersede(a.id, "Deploys go to Fly.io, region ams")
    for _ in range(3):
        ws.search("Fly.io deploys")
    stats = ws.lifecycle.stats()
    assert stats.memories == 2 and stats.by_type["fact"] == 1
    assert stats.by_type["preference"] == 1 and stats.by_file["memory.md"] == 2
    assert stats.archived == {"superseded": 1}
    assert stats.average_importance == 0.6
    assert stats.most_accessed[0].text == "Deploys go to Fly.io, region ams"
    assert stats.most_accessed[0].count == 3
    assert stats.least_accessed[0].count is None  # never returned: no count at all
    assert stats.searches == 3 and 0 < stats.latency_p50_ms <= stats.latency_p99_ms
    assert stats.last_consolidation is None


def test_latency_log_survives_torn_lines_and_is_trimmed(ws: Workspace) -> None:
    from mdmem.index import latency

    log = ws.files._state_dir / latency.LOG
    ws.files._state_dir.mkdir(exist_ok=True)
    log.write_text("garbage\n1.0\n" + "1700000000.000 2.5\n" * 4000)
    latency.record(ws.files._state_dir, 0.004)
    assert len(log.read_text().splitlines()) == latency.KEEP
    assert latency.recent(ws.files._state_dir)[-1] == 4.0


def test_consolidate_restore_related_stats_from_the_command_line(ws: Workspace) -> None:
    ws = _keyword_only(ws, "[consolidate]\nthreshold = 2\n")
    ids = [ws.remember(t, importance=i).id for t, i in
           (("Deploys go to Fly.io", 0.9), ("Backups run nightly", 0.7), ("Lunch is at noon", 0.2))]  # fmt: skip
    w = str(ws.root)
    dry = run("-w", w, "consolidate", "--by-importance", "--dry-run")
    assert "archived_by=importance" in dry.stdout and "Consolidation" in dry.stderr
    done = json.loads(run("-w", w, "consolidate", "--by-importance", "--json").stdout)
    assert done["archived"] == [ids[2]] and done["report_path"].startswith(".mdmem/")
    restored = run("-w", w, "restore", ids[2])
    assert restored.returncode == 0 and f"restored  {ids[2]}" in restored.stdout
    assert not Workspace(ws.root).get(ids[2]).archived
    again = run("-w", w, "restore", ids[2])  # nothing to restore: a clear error, no traceback
    assert again.returncode == 1 and "not archived by consolidation" in again.stderr
    assert "Traceback" not in again.stderr

    ws.lifecycle.relate(ids[1], ids[0], "contradicts")
    related = run("-w", w, "related", ids[0])
    assert f"{ids[1]} contradicts {ids[0]}" in related.stdout
    explained = run("-w", w, "search", "Fly.io deploys", "--explain", "--no-server")
    assert f"contradicted by {ids[1]}" in explained.stdout
    shown = run("-w", w, "stats")
    assert "archived     none" in shown.stdout  # the one archived came back
    assert "by importance" in shown.stdout and "searches     1 recent" in shown.stdout


def test_related_reports_a_missing_id_without_failing(ws: Workspace) -> None:
    path = ws.root / "memory.md"
    path.write_text(
        path.read_text()
        + "\n- Staging is on 6543 <!-- mdmem id=m-aaaaaaaaaa refines=m-gone000000 -->\n"
    )
    out = run("-w", str(ws.root), "related", "m-aaaaaaaaaa")
    assert out.returncode == 0, out.stderr
    assert (
        "(missing: in no file)" in out.stdout and "m-gone000000, which is in no file" in out.stderr
    )
    named = run("-w", str(ws.root), "related", "m-gone000000")  # was: "no entry with id"
    assert named.returncode == 0, named.stderr
    assert "m-aaaaaaaaaa refines m-gone000000" in named.stdout and "in no file" in named.stderr
    unknown = run("-w", str(ws.root), "related", "m-nowhere000")
    assert unknown.returncode == 1 and "no entry with id" in unknown.stderr


def test_a_dry_run_with_nothing_to_do_ends_its_line(ws: Workspace) -> None:
    """A dry run with nothing to do printed "(no change)" with no newline, into the table."""
    ws = _keyword_only(ws)
    for command in ("consolidate", "promote"):
        out = run("-w", str(ws.root), command, "--dry-run")
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("(no change)\n"), out.stdout
        if command == "consolidate":
            assert "superseded" in out.stderr  # the table's column


def test_search_explain_json_names_open_contradictions(ws: Workspace) -> None:
    """The JSON of `search --explain` carried no "contradicted by" (the text output did)."""
    ws = _keyword_only(ws)
    old = ws.remember("The staging port is 5432")
    new = ws.remember("The staging port is 6543")
    ws.lifecycle.relate(new, old.id, "contradicts")
    out = run("-w", str(ws.root), "search", "staging port", "--explain", "--json", "--no-server")
    assert out.returncode == 0, out.stderr
    hits = {h["id"]: h for h in json.loads(out.stdout)["hits"]}
    assert hits[old.id]["contradicted_by"] == [new.id]
    assert hits[new.id]["contradicted_by"] == []
    plain = json.loads(run("-w", str(ws.root), "search", "staging port", "--json").stdout)
    assert all("contradicted_by" not in h for h in plain["hits"])  # only with --explain
