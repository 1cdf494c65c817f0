"""Consolidation (issue 12 §2): candidates, clusters, merges, the fidelity check, the archive,
restore; with the real embedding model, the real files and litellm itself for the model path."""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from mdmem import Workspace
from mdmem.config import load_config
from mdmem.distill.consolidate import Consolidator
from mdmem.distill.fidelity import check, facts, keywords
from mdmem.errors import EditNotApplicable
from mdmem.markdown.entries import edited_by_hand
from mdmem.memory.writers import FileWriter
from mdmem.tokens import token_counter

DEPLOY = [
    "The deploy target is Fly.io in region ams",
    "Deploys go to Fly.io, region ams",
    "Production deploys go to Fly.io in the ams region",
]
OTHER = ["The database is PostgreSQL 16 on port 5432", "User prefers short answers"]
OLD = (dt.date.today() - dt.timedelta(days=200)).isoformat()


def _aged(ws: Workspace, texts: list[str], *, accessed: int | None = 1) -> list[str]:
    """Remember ``texts`` as facts dated 200 days ago, each returned ``accessed`` times."""
    ids = [ws.remember(t, type="fact").id for t in texts]
    path = ws.root / "memory.md"
    path.write_text(re.sub(r"created=\S+", f"created={OLD}", path.read_text()), encoding="utf-8")
    for _ in range(accessed or 0):
        ws.index._backend.bump_access(ids)
    return ids


@pytest.fixture
def mem(ws: Workspace, embedder) -> Workspace:
    return Workspace(ws.root, embedder=embedder)


def _active(ws: Workspace) -> dict[str, str]:
    return {e.id: e.text for e in ws.entries("memory.md")}


def test_merges_an_old_rarely_used_cluster_and_archives_the_originals(mem: Workspace) -> None:
    ids = _aged(mem, DEPLOY + OTHER)
    report = mem.lifecycle.consolidate(offline=True)
    assert report.count("merged") == 1 and report.merged == 3 and report.written == 1
    assert report.entries_after == 3 and report.tokens_after < report.tokens_before
    merged = [e for e in mem.entries("memory.md") if "refines" in e.meta]
    assert len(merged) == 1
    meta = merged[0].meta
    assert set(meta["refines"].split(",")) == set(ids[:3])
    assert float(meta["fidelity"]) >= 0.5 and "emb_sim" in meta and "kw_retention" in meta
    assert not edited_by_hand(merged[0])  # it carries its sum: a later run may merge it again
    archived = [e for e in mem.entries("memory.md", include_archived=True) if e.archived]
    assert {e.id for e in archived} == set(ids[:3])
    assert {e.meta["consolidated_into"] for e in archived} == {merged[0].id}
    refines = {(r.kind, r.target) for r in mem.lifecycle.related(merged[0].id)}
    assert refines == {("refines", i) for i in ids[:3]}  # a relation, as ws.related reads it
    saved = json.loads((mem.root / report.report_path).read_text())  # the full report
    assert saved["clusters"][0]["merges"][0]["fidelity"]["lost_facts"] == []
    # a re-run finds nothing more to do: the merged memory is new, the originals archived
    again = mem.lifecycle.consolidate(offline=True)
    assert again.merged == 0 and again.diff == ""


def test_dry_run_writes_nothing_and_shows_the_diff(mem: Workspace) -> None:
    _aged(mem, DEPLOY)
    before = (mem.root / "memory.md").read_bytes()
    report = mem.lifecycle.consolidate(offline=True, dry_run=True)
    assert (mem.root / "memory.md").read_bytes() == before
    assert "+## Archive" in report.diff and "consolidated_into=" in report.diff
    assert report.report_path is None


def test_missing_access_counts_count_as_recently_used(mem: Workspace) -> None:
    """A fresh index (or another machine) has no counts: nothing old is a candidate by age."""
    _aged(mem, DEPLOY, accessed=None)
    report = mem.lifecycle.consolidate(offline=True)
    assert report.candidates == 0 and report.merged == 0


def _history_since(ws: Workspace, days: int) -> None:
    """As if the index had been counting accesses for ``days`` days."""
    since = (dt.datetime.now() - dt.timedelta(days=days)).isoformat(timespec="seconds")
    ws.index._backend.conn.execute(  # type: ignore[attr-defined]
        "UPDATE meta SET value = ? WHERE key = 'access_since'", (since,)
    )


def test_an_index_counting_for_min_age_days_reads_no_count_as_never_returned(
    mem: Workspace,
) -> None:
    """A memory no search returned in the index's whole history (at least min_age_days) is
    old and unused: a candidate. A shorter history still reads it as recently used."""
    _aged(mem, DEPLOY, accessed=None)
    assert mem.index._backend.access_since() is not None  # set when the index was made
    _history_since(mem, 89)
    assert mem.lifecycle.consolidate(offline=True, dry_run=True).candidates == 0
    _history_since(mem, 90)
    report = mem.lifecycle.consolidate(offline=True)
    assert report.candidates == 3 and report.merged == 3
    assert "no_count" not in dict(report.passed_over)


def test_access_history_starts_with_the_index_and_again_when_it_is_rebuilt(
    mem: Workspace,
) -> None:
    """An index of before the key gets it at its first open (its history starts then); a
    deleted index starts its history anew, so its missing counts are recently used again."""
    _aged(mem, DEPLOY, accessed=None)
    conn = mem.index._backend.conn  # type: ignore[attr-defined]
    conn.execute("DELETE FROM meta WHERE key = 'access_since'")  # an index made before it
    mem.close()
    again = Workspace(mem.root, embedder=mem.index.embedder())
    recent = dt.datetime.now() - dt.timedelta(minutes=5)
    since = again.index._backend.access_since()
    assert since is not None and dt.datetime.fromisoformat(since) > recent
    _history_since(again, 400)
    assert again.lifecycle.consolidate(offline=True, dry_run=True).candidates == 3
    again.close()
    for suffix in ("", "-wal", "-shm"):
        (again.files._state_dir / f"index.db{suffix}").unlink(missing_ok=True)
    rebuilt = Workspace(mem.root, embedder=mem.index.embedder())
    assert dt.datetime.fromisoformat(rebuilt.index._backend.access_since() or "") > recent
    assert rebuilt.lifecycle.consolidate(offline=True, dry_run=True).candidates == 0


def test_the_report_says_why_memories_are_no_candidates(mem: Workspace) -> None:
    """A first run used to say "0 of 6 memories were candidates" and nothing more: each memory
    passed over is counted under its reason."""
    ids = _aged(mem, [*DEPLOY, "The office is in Lyon"], accessed=None)  # old, no count
    for _ in range(5):
        mem.index._backend.bump_access([ids[0]])  # returned often
    mem.index._backend.bump_access([ids[3]])
    path = mem.root / "memory.md"
    text = path.read_text().replace("is in Lyon", "is in Lyon, France")  # edited by hand
    path.write_text(text + "- The printer is on floor 2\n", encoding="utf-8")  # no date
    mem.remember("The CI runs on Python 3.12", type="fact")  # young
    report = mem.lifecycle.consolidate(offline=True, dry_run=True)
    assert dict(report.passed_over) == {
        "by_hand": 1,
        "often_used": 1,
        "no_count": 2,
        "young": 1,
        "undated": 1,
    }
    summary = report.summary()
    assert "2 with no access count (counted as recently used)" in summary
    assert "1 younger than min_age_days" in summary and "1 returned often" in summary
    assert report.to_dict()["passed_over"] == dict(report.passed_over)


def test_often_returned_memories_are_kept(mem: Workspace) -> None:
    ids = _aged(mem, DEPLOY)
    mem.index._backend.bump_access([ids[0]] * 1)
    for _ in range(4):
        mem.index._backend.bump_access([ids[0]])  # 5 returns: max_access
    report = mem.lifecycle.consolidate(offline=True)
    assert report.merged == 0 and ids[0] in _active(mem)
    assert report.clusters[0].outcome == "kept"


def test_hand_written_and_hand_edited_memories_are_only_suggested(mem: Workspace) -> None:
    ids = _aged(mem, DEPLOY)
    path = mem.root / "memory.md"
    text = path.read_text().replace(
        "Deploys go to Fly.io, region ams", "Deploys go to Fly.io (ams)"
    )
    path.write_text(text + "- Our deploys go to Fly.io, region ams, always\n", encoding="utf-8")
    report = mem.lifecycle.consolidate(offline=True)
    assert report.merged == 0
    assert set(_active(mem)) >= {ids[0], ids[1], ids[2]}
    assert any(ids[1] in s for s in report.suggestions)


def test_a_suggestion_names_a_few_ids_and_the_report_all() -> None:
    """A cluster of 152 hand-written look-alikes used to print all 152 ids on one line."""
    from mdmem.distill.consolidate import SUGGESTED_IDS, Cluster, _suggestion

    ids = tuple(f"h-{n:010d}" for n in range(20))
    cluster = Cluster("memory.md", "fact", ids, "kept", "", protected=ids)
    line = _suggestion(cluster)
    assert ids[SUGGESTED_IDS - 1] in line and ids[SUGGESTED_IDS] not in line
    assert f"and {20 - SUGGESTED_IDS} more" in line
    assert cluster.to_dict()["protected"] == list(ids)


def test_threshold_makes_every_memory_a_candidate(mem: Workspace) -> None:
    (mem.root / "mdmem.toml").write_text(
        (mem.root / "mdmem.toml").read_text() + "\n[consolidate]\nthreshold = 3\n"
    )
    mem.config = load_config(mem.root)
    for text in DEPLOY + OTHER:  # new, never returned: only the threshold makes them candidates
        mem.remember(text)
    report = mem.lifecycle.consolidate(offline=True)
    assert report.rule == "threshold" and report.merged == 3


def test_a_newer_conflicting_memory_supersedes_the_older(mem: Workspace) -> None:
    ids = _aged(mem, ["The staging database port is 5432", *DEPLOY])
    newer = _aged(mem, ["The staging database port is 6543"])[0]
    path = mem.root / "memory.md"  # the old value dated earlier (was: both dated alike)
    path.write_text(path.read_text().replace(f"created={OLD}", "created=2020-01-01", 1))
    # both alone: a pair, not a cluster of 3, but the conflict still resolves to the newest
    report = mem.lifecycle.consolidate(offline=True)
    old = mem.get(ids[0])
    assert old.archived and old.meta["superseded_by"] == newer, report.clusters
    assert mem.get(newer).meta["supersedes"] == ids[0]


def test_a_recent_memory_that_changes_an_old_one_supersedes_it(mem: Workspace) -> None:
    """The newer value is no candidate (young): it was never clustered, so the old value stayed
    active beside it, run after run."""
    old, cache = _aged(mem, ["The staging database port is 5432", "The staging cache port is 6379"])
    newer = mem.remember("The staging database port is 6543", type="fact").id
    path = mem.root / "memory.md"
    path.write_text(path.read_text() + "- The staging cache port is 6380\n", encoding="utf-8")
    report = mem.lifecycle.consolidate(offline=True)
    assert mem.get(old).archived and mem.get(old).meta["superseded_by"] == newer
    assert mem.get(newer).meta["supersedes"] == old and not mem.get(newer).archived
    assert report.superseded == 1 and "1 superseded by a newer value" in report.summary()
    assert not mem.get(cache).archived  # a person's newer line changes nothing by itself
    assert mem.lifecycle.consolidate(offline=True).diff == ""  # settled


def test_every_pair_that_conflicts_shares_a_lookup_key() -> None:
    """Consolidation finds the newer memory that changes a candidate by key lookup (comparing
    every pair is quadratic): a conflicting pair the keys miss would stay unresolved."""
    from itertools import permutations

    from mdmem.distill.dedupe import conflict_keys, conflicts

    texts = [
        "The staging database port is 5432",
        "The staging database port is 6543",
        "The staging database port is 6543, region ams",
        "Retry failed webhooks 3 times",
        "Retry failed webhooks 5 times",
        "We use Celery for background jobs",
        "We no longer use Celery for background jobs",
        "The user's favourite editor is Vim",
        "The user's favourite editor is Emacs",
        "Jon is a dancer",
        "Jon is tired",
        "CI runs on Python 3.11",
        "CI runs on Python 3.12",
        "Deploys go to Fly.io in region ams",
        "Deploys go to Fly.io in region fra",
        "The invoice PDF uses WeasyPrint",
        "The invoice PDF uses wkhtmltopdf",
    ]
    found = 0
    for new, old in permutations(texts, 2):
        if conflicts(new, old):
            found += 1
            assert conflict_keys(new) & conflict_keys(old), (new, old)
    assert found >= 8  # the list holds real conflicts of each kind


def test_no_embeddings_archive_nothing_unless_by_importance(ws: Workspace) -> None:
    (ws.root / "mdmem.toml").write_text(
        ws.root.joinpath("mdmem.toml").read_text()
        + '\n[embedding]\nmodel = ""\n[consolidate]\nthreshold = 2\n'
    )
    ws = Workspace(ws.root)
    for n, text in enumerate(DEPLOY):
        ws.remember(text, importance=0.3 + n / 10)
    report = ws.lifecycle.consolidate()
    assert report.engine == "none" and len(_active(ws)) == 3
    report = ws.lifecycle.consolidate(by_importance=True)
    assert report.engine == "importance" and len(report.archived) == 1
    assert DEPLOY[0] not in _active(ws).values()  # the least important went to the archive
    archived = ws.get(report.archived[0])
    assert archived.archived and archived.meta["archived_by"] == "importance"


def test_restore_brings_the_originals_back_and_archives_the_merge(mem: Workspace) -> None:
    ids = _aged(mem, DEPLOY)
    mem.lifecycle.consolidate(offline=True)
    merged = next(e for e in mem.entries("memory.md") if "refines" in e.meta)
    report = mem.lifecycle.restore(merged.id)
    assert set(report.restored) == set(ids) and report.archived == (merged.id,)
    assert set(_active(mem)) == set(ids)
    assert mem.get(merged.id).archived
    # restored memories are never merged again on their own
    assert mem.lifecycle.consolidate(offline=True).merged == 0
    with pytest.raises(EditNotApplicable):
        mem.lifecycle.restore(ids[0])


def test_restore_brings_the_originals_back_when_a_person_deleted_the_merge(
    mem: Workspace,
) -> None:
    ids = _aged(mem, DEPLOY)
    mem.lifecycle.consolidate(offline=True)
    merged = next(e for e in mem.entries("memory.md") if "refines" in e.meta)
    path = mem.root / "memory.md"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(ln for ln in lines if f"id={merged.id} " not in ln), encoding="utf-8")
    report = mem.lifecycle.restore(merged.id)  # was: "no entry with id ..."
    assert set(report.restored) == set(ids) and report.archived == ()
    assert set(_active(mem)) == set(ids)


def test_restore_with_a_hand_edited_archive(mem: Workspace) -> None:
    """A person deleted one archived original and edited another: the rest comes back, the
    missing one is reported, nothing crashes."""
    ids = _aged(mem, DEPLOY)
    mem.lifecycle.consolidate(offline=True)
    merged = next(e for e in mem.entries("memory.md") if "refines" in e.meta)
    path = mem.root / "memory.md"
    lines = [ln for ln in path.read_text().splitlines(keepends=True) if f"id={ids[0]}" not in ln]
    text = "".join(lines).replace("Deploys go to Fly.io, region ams", "Deploys: Fly.io, ams")
    path.write_text(text, encoding="utf-8")
    report = mem.lifecycle.restore(merged.id)
    assert set(report.restored) == {ids[1], ids[2]} and report.missing == (ids[0],)
    assert "Deploys: Fly.io, ams" in _active(mem).values()


def test_a_hand_edited_merged_memory_is_left_alone(mem: Workspace) -> None:
    _aged(mem, DEPLOY)
    mem.lifecycle.consolidate(offline=True)
    merged = next(e for e in mem.entries("memory.md") if "refines" in e.meta)
    path = mem.root / "memory.md"
    path.write_text(path.read_text().replace(merged.text, "Deploys: Fly.io, region ams (checked)"))
    assert edited_by_hand(mem.get(merged.id))
    report = mem.lifecycle.restore(merged.id)  # still restorable; the edit is archived, not lost
    assert mem.get(merged.id).text == "Deploys: Fly.io, region ams (checked)"
    assert len(report.restored) == 3


def test_entries_without_dates_or_ids_are_never_candidates(mem: Workspace) -> None:
    path = mem.root / "memory.md"
    path.write_text(
        "# Memory\n\n## Facts\n\n"
        + "".join(f"- {t}\n" for t in DEPLOY)  # hand-written: no metadata
        + "".join(f"- {t} <!-- mdmem type=fact importance=0.5 -->\n" for t in OTHER),
        encoding="utf-8",
    )
    report = mem.lifecycle.consolidate(offline=True)
    assert report.candidates == 0 and report.merged == 0 and report.diff == ""


class PersonEditsFirst:
    """A writer that lets a person save memory.md just before each program write lands."""

    def __init__(self, inner: FileWriter, person) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.person = inner, person

    def write(self, rel, edit, *, create=True, exact=False):  # type: ignore[no-untyped-def]
        self.person(self.inner.documents.root / rel)
        return self.inner.write(rel, edit, create=create, exact=exact)

    def current(self, rel):  # type: ignore[no-untyped-def]
        return self.inner.current(rel)


def test_a_persons_edit_during_consolidation_survives(mem: Workspace, embedder) -> None:
    ids = _aged(
        mem,
        [
            *DEPLOY,
            "Backups run nightly at 02:00",
            "Backups run every night at 02:00",
            "Nightly backups start at 02:00",
        ],
    )

    def person(path: Path) -> None:
        text = path.read_text().replace("Deploys go to Fly.io, region ams", "Deploys go to Fly")
        path.write_text(text + "- a note the person added\n", encoding="utf-8")

    writer = PersonEditsFirst(mem._w.files, person)
    report = Consolidator(
        mem.config,
        mem._w.documents,
        writer,
        mem.files._redactor,
        lambda: embedder.embed,
        mem.index._backend.access_counts,
        mem.files._state_dir,
        token_counter(None),
    ).run(offline=True)
    outcomes = {c.members[0]: c.outcome for c in report.clusters}
    assert outcomes[ids[0]] == "changed" and outcomes[ids[3]] == "merged"
    text = (mem.root / "memory.md").read_text()
    assert "- Deploys go to Fly <!--" in text and "a note the person added" in text
    assert set(ids[:3]) <= set(_active(mem))


# ---- fidelity --------------------------------------------------------------------------------


def test_a_paraphrase_that_loses_names_is_refused_whatever_its_cosine() -> None:
    sources = ["Caroline went to the LGBTQ support group in Boston on 7 May 2023"]
    lossy = check("She went to a support group.", sources, [0.95], 0.5)
    assert not lossy.passed and "name caroline" in lossy.lost_facts
    assert "date 2023-05-07" in lossy.lost_facts and lossy.composite > 0.5 - 0.2
    kept = check("On 7 May 2023 Caroline attended the LGBTQ group in Boston.", sources, [0.8], 0.5)
    assert kept.passed and kept.kw_retention == 1.0
    # the same date written otherwise keeps the date, but not the words a search finds it by
    iso = check("On 2023-05-07 Caroline attended the LGBTQ group in Boston.", sources, [0.8], 0.5)
    assert not iso.passed and "date 2023-05-07" not in iso.lost_facts
    assert {"token may", "token 2023"} <= set(iso.lost_facts)


def test_a_merge_that_drops_a_lowercase_identifier_is_refused() -> None:
    """Issue 31: "module m3" is no number, name or keyword of the older rules: kw_retention
    was 1 for a merge naming only m0."""
    sources = [f"The user prefers type hints on every function in module m{n}" for n in (0, 3)]
    lossy = check(sources[0], sources, [0.97, 0.96], 0.5)
    assert lossy.kw_retention == 1.0 and not lossy.passed and "token m3" in lossy.lost_facts
    assert check("; ".join(sources), sources, [0.9, 0.9], 0.5).passed


def test_numbers_identifiers_and_cjk_keywords() -> None:
    text = "Set MAX_RETRIES in config/app.toml via retry_policy to 1,000; 用户喜欢深色模式"
    found = facts(text)
    assert {"number 1000", "id max_retries", "id config/app.toml", "id retry_policy"} <= found
    assert {"深色", "模式"} <= keywords(text)
    low = check("Set retries in the config to 1000", [text], [0.9], 0.5)
    assert not low.passed and "id max_retries" in low.lost_facts
    assert check(text, [text], [1.0], 0.5).passed
    assert check(text, [text], [0.1], 0.5).composite < 0.5  # a low cosine still refuses


# ---- the model path, through litellm itself ------------------------------------------------------


def _with_model(ws: Workspace) -> Workspace:
    (ws.root / "mdmem.toml").write_text(
        ws.root.joinpath("mdmem.toml").read_text() + '\n[llm]\nmodel = "scripted/merge"\n'
    )
    ws.config = load_config(ws.root)
    return ws


def test_llm_merge_is_checked_and_written(mem: Workspace, scripted) -> None:
    ids = _aged(_with_model(mem), DEPLOY)
    reply = {
        "memories": [
            {
                "content": "Production deploys go to Fly.io, region ams",
                "importance": 0.7,
                "source_memory_ids": ids,
            }
        ]
    }
    script = scripted(json.dumps(reply))
    report = mem.lifecycle.consolidate()
    assert report.engine == "llm" and report.merged == 3
    assert script[0][1]["content"].count("- [m-") == 3  # one call, the cluster listed
    merged = next(e for e in mem.entries("memory.md") if "refines" in e.meta)
    assert merged.text == "Production deploys go to Fly.io, region ams"
    assert merged.importance == 0.7


def test_llm_merge_losing_a_number_is_refused(mem: Workspace, scripted) -> None:
    ids = _aged(
        _with_model(mem),
        [
            "Backups run nightly at 02:00 UTC",
            "Backups run every night at 02:00 UTC",
            "Nightly backups start at 02:00 UTC, kept 14 days",
        ],
    )
    reply = [
        {"content": "Backups run nightly at 02:00 UTC", "importance": 0.6, "source_memory_ids": ids}
    ]
    scripted(json.dumps(reply))  # a bare list is accepted too
    report = mem.lifecycle.consolidate()
    assert report.count("refused") == 1 and report.merged == 0
    assert "number 14" in report.refused[0].fidelity.lost_facts
    assert set(ids) <= set(_active(mem))


def test_llm_bad_reply_gets_one_repair_then_changes_nothing(mem: Workspace, scripted) -> None:
    ids = _aged(_with_model(mem), DEPLOY)
    script = scripted("not json", '{"memories": [{"content": "x", "source_memory_ids": ["m-0"]}]}')
    report = mem.lifecycle.consolidate()
    assert len(script) == 2 and "not usable" in script[1][-1]["content"]
    assert report.count("failed") == 1 and len(report.problems) == 2
    assert set(ids) <= set(_active(mem))


# ---- killed mid-run ------------------------------------------------------------------------------


class ByService:
    """A stand-in for the model, so a killed child starts in a second: one direction per
    service named in the text."""

    model_id = "test/by-service"

    def embed(self, texts, progress=None):  # type: ignore[no-untyped-def]
        import numpy as np

        out = np.zeros((len(texts), 512), dtype=np.float32)
        for row, text in enumerate(texts):
            for n in re.findall(r"svc(\d+)", text):
                out[row, int(n) % 512] = 1.0
            out[row] /= max(float(np.linalg.norm(out[row])), 1e-9)
        return out


CHILD = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_consolidate import ByService
from mdmem import Workspace
Workspace(sys.argv[1], embedder=ByService()).lifecycle.consolidate(offline=True)
"""


def _service_files(root: Path, services: int) -> None:
    from mdmem.markdown.entries import text_sum

    def lines(kind: str, offset: int) -> str:
        out = []
        for n in range(offset, offset + services):
            for text in (
                f"Service svc{n} runs on port {8000 + n} in region ams",
                f"svc{n} listens on port {8000 + n}, region ams",
                f"The svc{n} service uses port {8000 + n} (ams)",
            ):
                meta = f"id=m-{n:04x}{len(out):06x} type={kind} importance=0.5 created={OLD}"
                out.append(f"- {text} <!-- mdmem {meta} sum={text_sum(text)} -->\n")
        return "".join(out)

    (root / "mdmem.toml").write_text("[consolidate]\nthreshold = 10\n")
    (root / "memory.md").write_text("# Memory\n\n## Facts\n\n" + lines("fact", 0))
    (root / "learnings.md").write_text("# Learnings\n\n## Skills\n\n" + lines("skill", services))


def _consistent(root: Path) -> int:
    """Every original once; each archived one points at a live merge that names it. Returns
    how many merged memories there are."""
    ws = Workspace(root)
    entries = ws.entries(include_archived=True)
    ids = [e.id for e in entries]
    assert len(ids) == len(set(ids)), "an entry was duplicated"
    by_id = {e.id: e for e in entries}
    merged = [e for e in entries if "refines" in e.meta and not e.archived]
    for e in entries:
        if e.archived:
            target = by_id[e.meta["consolidated_into"]]
            assert not target.archived and e.id in target.meta["refines"].split(",")
    for m in merged:
        assert all(by_id[s].archived for s in m.meta["refines"].split(","))
    return len(merged)


@pytest.mark.slow
def test_sigkill_mid_consolidation_leaves_old_or_new_files_and_a_rerun_converges(
    tmp_path: Path,
) -> None:
    import random
    import subprocess
    import sys
    import time

    seed = random.randrange(2**32)
    rng = random.Random(seed)
    services = 40
    full = tmp_path / "full"
    full.mkdir()
    _service_files(full, services)
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", CHILD, str(full)], check=True)
    took = time.monotonic() - started
    assert _consistent(full) == 2 * services
    for round_ in range(2):
        root = tmp_path / f"k{round_}"
        root.mkdir()
        _service_files(root, services)
        before = {p: (root / p).read_bytes() for p in ("memory.md", "learnings.md")}
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(root)])
        time.sleep(rng.uniform(0.4, 1.0) * took)
        proc.kill()
        proc.wait()
        for name, old in before.items():
            now = (root / name).read_bytes()
            assert now == old or b"consolidated_into=" in now, f"seed {seed}: {name}"
        _consistent(root)  # each file is the old or the new bytes: never half a consolidation
        Workspace(root, embedder=ByService()).lifecycle.consolidate(offline=True)  # the re-run
        assert _consistent(root) == 2 * services, f"seed {seed}"
        settled = {p: (root / p).read_bytes() for p in before}
        Workspace(root, embedder=ByService()).lifecycle.consolidate(offline=True)
        assert {p: (root / p).read_bytes() for p in before} == settled, f"seed {seed}"


# ---- issue 31: consolidation never hides a distinct fact ----------------------------------------
# The oracle (benchmarks/hidden_facts.py) is written from the issue's words, apart from
# mdmem/distill/fidelity.py: every distinguishing token of what the program archived is in a live
# memory it points to (a superseded memory may lose only its one changed value).

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from hidden_facts import hidden_facts  # noqa: E402

JOB = "The ledger job number {n} runs nightly at 0{h}:15 UTC with timeout {t}s"
MODULE = (
    "The user prefers type hints on every function in module m{k}",
    "User wants type annotations everywhere in module m{k}",
)


def _written(root: Path, memories: list[tuple[str, str, int]], toml: str) -> Workspace:
    """A workspace whose memory.md holds ``(text, type, days old)`` as the program writes them
    (id, created, sum: not hand-written), every one a candidate under ``toml``."""
    from mdmem.markdown.entries import new_id, text_sum

    sections: dict[str, list[str]] = {"fact": [], "preference": []}
    for text, type_, age in memories:
        day = (dt.date.today() - dt.timedelta(days=age)).isoformat()
        meta = f"id={new_id()} type={type_} importance=0.5 created={day} sum={text_sum(text)}"
        sections[type_].append(f"- {text} <!-- mdmem {meta} -->\n")
    body = "".join(
        f"## {title}\n\n" + "".join(sections[type_]) + "\n"
        for type_, title in (("preference", "Preferences"), ("fact", "Facts"))
    )
    root.mkdir(parents=True, exist_ok=True)
    (root / "mdmem.toml").write_text(toml)
    (root / "memory.md").write_text("# Memory\n\n" + body, encoding="utf-8")
    return Workspace(root)


def _live_texts(ws: Workspace) -> str:
    return "\n".join(e.text for e in ws.entries("memory.md"))


def test_issue31_three_jobs_and_six_modules_stay_distinct(tmp_path: Path, embedder) -> None:
    """The issue's case: 15 → 3 memories, jobs 27 and 47 "superseded by a newer value", twelve
    module preferences merged into two naming only m0."""
    import random

    rng = random.Random(31)
    memories = [
        (JOB.format(n=n, h=n // 10, t=n), "fact", rng.randint(100, 160)) for n in (7, 27, 47)
    ]
    memories += [
        (text.format(k=k), "preference", rng.randint(100, 160)) for k in range(6) for text in MODULE
    ]
    ws = _written(tmp_path / "w", memories, "[consolidate]\nthreshold = 3\n")
    ws = Workspace(ws.root, embedder=embedder)
    report = ws.lifecycle.consolidate(offline=True)
    assert hidden_facts(ws.root) == []
    assert report.superseded == 0 and report.changes == ()
    live = _live_texts(ws)
    for n in (7, 27, 47):
        assert f"job number {n} runs" in live
    for k in range(6):
        assert all(text.format(k=k) in live for text in MODULE)


def test_a_superseded_memory_is_listed_and_restored(tmp_path: Path, embedder) -> None:
    """A changed value is listed in the report, and `mdmem restore` brings it back (it refused:
    "was not archived by consolidation")."""
    from typer.testing import CliRunner

    from mdmem.cli import app

    memories = [
        ("The staging database port is 5432", "fact", 150),
        ("The staging database port is 6543", "fact", 120),
        (JOB.format(n=7, h=0, t=30), "fact", 150),
        (JOB.format(n=27, h=0, t=30), "fact", 120),  # another job, not a new value of job 7
    ]
    ws = _written(tmp_path / "w", memories, "[consolidate]\nthreshold = 2\n")
    ws = Workspace(ws.root, embedder=embedder)
    old, new, job7, job27 = (e.id for e in ws.entries("memory.md"))
    report = ws.lifecycle.consolidate(offline=True)
    assert [(c.old, c.new) for c in report.changes] == [(old, new)]
    assert report.to_dict()["changes"][0]["old_text"] == "The staging database port is 5432"
    assert not ws.get(job7).archived and not ws.get(job27).archived
    assert hidden_facts(ws.root) == []
    out = CliRunner().invoke(app, ["-w", str(ws.root), "restore", old])
    assert out.exit_code == 0 and f"restored  {old}" in out.output, out.output
    back = ws.get(old)
    assert not back.archived and "superseded_by" not in back.meta and "restored" in back.meta
    assert "supersedes" not in ws.get(new).meta
    assert ws.lifecycle.consolidate(offline=True).changes == ()  # a restored memory stays


def test_restore_by_the_newer_memory_brings_back_what_it_superseded(
    tmp_path: Path, embedder
) -> None:
    memories = [
        ("The staging database port is 5432", "fact", 150),
        ("The staging database port is 6543", "fact", 120),
    ]
    ws = _written(tmp_path / "w", memories, "[consolidate]\nthreshold = 1\n")
    ws = Workspace(ws.root, embedder=embedder)
    old, new = (e.id for e in ws.entries("memory.md"))
    assert ws.lifecycle.consolidate(offline=True).superseded == 1
    report = ws.lifecycle.restore(new)
    assert report.restored == (old,) and report.archived == ()
    assert {e.id for e in ws.entries("memory.md")} == {old, new}


def test_a_value_slot_is_never_a_name_of_the_subject() -> None:
    """The conflict rule consolidation and extraction share (dedupe.conflicts)."""
    from mdmem.distill.dedupe import conflicts, resolve_offline
    from mdmem.distill.extract import Candidate
    from mdmem.markdown.entries import Entry

    def changes(new: str, old: str) -> bool:
        entry = Entry("memory.md", 1, 1, old, ("Memory",), "item", "fact", 0.5, "m-1")
        replaced = resolve_offline(Candidate("fact", new, 0.5, new), entry).action == "replace"
        assert replaced == conflicts(new, old), (new, old)
        return replaced

    assert changes("The staging database port is 6543", "The staging database port is 5432")
    assert changes("CI runs on Python 3.12", "CI runs on Python 3.11")
    assert changes("The deploy target is Fly.io", "The deploy target is Heroku")
    assert not changes(JOB.format(n=27, h=2, t=27), JOB.format(n=7, h=0, t=7))  # three slots
    assert not changes(JOB.format(n=27, h=0, t=30), JOB.format(n=7, h=0, t=30))  # job 27
    assert not changes(MODULE[0].format(k=3), MODULE[0].format(k=0))  # module m3
    assert not changes("The Billing API v2.5 returns JSON", "The Billing API v2.4 returns JSON")
    assert not changes("Jon is tired", "Jon is a dancer")


# -- the invariant over generated memory sets

FACTS = {
    "job": (JOB, "fact"),
    "module": (MODULE[0], "preference"),
    "module2": (MODULE[1], "preference"),
    "port": ("The staging database port is {p}", "fact"),
    "region": ("The {svc} service is deployed to region {r}", "fact"),
    "api": ("The {Svc} API v2.{m} returns JSON", "fact"),
    "topic": ("Events of {svc} go to Kafka topic {topic}", "fact"),
}
SUBJECT = {
    "job": ("n",),
    "module": ("k",),
    "module2": ("k",),
    "port": (),
    "region": ("svc",),
    "api": ("Svc", "m"),
    "topic": ("svc",),
}
"""The generator's truth: which parameters name what a memory is about (the rest are values)."""


def _kind(kind: str) -> SearchStrategy[tuple[str, str, int, tuple[object, ...]]]:
    """One memory of a template: (text, type, days old, its subject by the generator)."""
    svc = st.sampled_from(["billing", "search"])
    params = {
        "job": st.fixed_dictionaries(
            {
                "n": st.sampled_from([7, 27, 47]),
                "h": st.integers(0, 2),
                "t": st.sampled_from([30, 45]),
            }
        ),
        "module": st.fixed_dictionaries({"k": st.integers(0, 3)}),
        "module2": st.fixed_dictionaries({"k": st.integers(0, 3)}),
        "port": st.fixed_dictionaries({"p": st.sampled_from([5432, 6543, 7000])}),
        "region": st.fixed_dictionaries(
            {"svc": svc, "r": st.sampled_from(["eu-west-1", "us-east-2", "ams"])}
        ),
        "api": st.fixed_dictionaries(
            {"Svc": st.sampled_from(["Billing", "Search"]), "m": st.integers(1, 3)}
        ),
        "topic": st.fixed_dictionaries(
            {"svc": svc, "topic": st.sampled_from(["orders_v1", "audit.log", "orders_v2"])}
        ),
    }[kind]
    template, type_ = FACTS[kind]
    return st.tuples(params, st.integers(100, 160)).map(
        lambda pa: (
            template.format(**pa[0]),
            type_,
            pa[1],
            (kind.rstrip("2"), *(pa[0][k] for k in SUBJECT[kind])),
        )
    )


def _facts() -> SearchStrategy[list[tuple[str, str, int, tuple[object, ...]]]]:
    return st.lists(st.sampled_from(sorted(FACTS)).flatmap(_kind), min_size=3, max_size=10)


@settings(max_examples=20)  # cheaper: each example embeds and consolidates a workspace
@given(memories=_facts())
@example(
    memories=[
        (JOB.format(n=n, h=n // 10, t=n), "fact", age, ("job", n))
        for n, age in ((7, 130), (27, 100), (47, 160))
    ]
    + [(text.format(k=k), "preference", 120, ("module", k)) for k in range(4) for text in MODULE]
)
def test_consolidation_hides_no_distinct_fact(
    memories: list[tuple[str, str, int, tuple[object, ...]]], embedder
) -> None:
    """Over generated memory sets, every memory a candidate (threshold) and clusters made wide
    (similarity 0.3): the oracle finds nothing hidden, and each memory superseded has the
    subject of the newer one (by the generator's truth) and an earlier date."""
    import tempfile

    truth = {text: subject for text, _, _, subject in memories}
    toml = "[consolidate]\nthreshold = 1\nsimilarity = 0.3\n"
    with tempfile.TemporaryDirectory() as folder:
        ws = _written(Path(folder) / "w", [m[:3] for m in memories], toml)
        ws = Workspace(ws.root, embedder=embedder)
        ws.lifecycle.consolidate(offline=True)
        assert hidden_facts(ws.root) == []
        every = {e.id: e for e in ws.entries("memory.md", include_archived=True)}
        for entry in every.values():
            if "superseded_by" in entry.meta:
                newer = every[entry.meta["superseded_by"]]
                assert truth[entry.text] == truth[newer.text], (entry.text, newer.text)
                assert (newer.created or "") > (entry.created or "")
        ws.close()


# -- the same invariant where extraction and compaction resolve a conflict (dedupe.decide)


Pair = tuple[tuple[str, tuple[object, ...]], tuple[str, tuple[object, ...]]]


def _pairs() -> SearchStrategy[Pair]:
    """Two memories of one template (the hardest case: the same words but the slots)."""
    text_and_subject = lambda kind: _kind(kind).map(lambda m: (m[0], m[3]))  # noqa: E731
    kinds = st.sampled_from(sorted(set(FACTS) - {"module2"}))
    return kinds.flatmap(lambda k: st.tuples(text_and_subject(k), text_and_subject(k)))


@given(pair=_pairs())
def test_extraction_replaces_only_a_changed_value(pair: Pair) -> None:
    """A candidate that replaces or merges into an existing memory keeps its distinguishing
    tokens but one changed value (the oracle), and has its subject (the generator's truth)."""
    from hidden_facts import changed_value, distinguishing, words

    from mdmem.distill.dedupe import decide
    from mdmem.distill.extract import Candidate
    from mdmem.markdown.entries import Entry

    (old, old_subject), (new, new_subject) = pair
    existing = Entry("memory.md", 3, 3, old, ("Memory",), "item", "fact", 0.5, "m-1")
    [decision] = decide([Candidate("fact", new, 0.6, new)], [existing])
    if decision.action in ("replace", "merge"):
        missing = distinguishing(old) - set(words(decision.text))
        if decision.action == "replace":
            missing -= changed_value(old, decision.text)
        assert not missing, (old, decision)
        assert old_subject == new_subject, (old, new)


def test_a_models_replace_that_hides_a_fact_keeps_both(scripted, embedder) -> None:
    """The model may call job 27 a new value of job 7: the rule keeps both."""
    from mdmem.config import LLMConfig
    from mdmem.distill.dedupe import decide
    from mdmem.distill.extract import Candidate
    from mdmem.markdown.entries import Entry

    old, new = JOB.format(n=7, h=0, t=30), JOB.format(n=27, h=0, t=30)
    existing = Entry("memory.md", 3, 3, old, ("Memory",), "item", "fact", 0.5, "m-1")
    scripted('{"action": "replace", "reason": "newer job number"}')
    [decision] = decide(
        [Candidate("fact", new, 0.6, new)],
        [existing],
        embed=embedder.embed,
        threshold=0.9,
        llm=LLMConfig(model="scripted/m"),
    )
    assert decision.action == "keep_both" and "would hide 7" in decision.reason


def test_a_reversal_supersedes_no_fact_it_does_not_restate(embedder) -> None:
    """Found by the oracle in benchmarks/consolidate_agent.py (seed 1): "We switched PDF
    rendering from wkhtmltopdf to WeasyPrint" superseded "PDFs are rendered by wkhtmltopdf from
    the Jinja templates", and Jinja was in no live memory."""
    from mdmem.distill.reversal import stale
    from mdmem.markdown.entries import Entry, text_sum

    def fact(n: int, text: str) -> Entry:
        meta = {"id": f"m-{n}", "sum": text_sum(text)}
        return Entry("memory.md", n, n, text, ("Memory",), "item", "fact", 0.5, f"m-{n}", meta=meta)

    decided = fact(1, "The team decided to render invoice PDFs with wkhtmltopdf")
    jinja = fact(2, "PDFs are rendered by wkhtmltopdf from the Jinja templates")
    switch = "We switched PDF rendering from wkhtmltopdf to WeasyPrint"
    found = stale(switch, [decided, jinja], embedder.embed)
    assert found == [decided]
