"""The offline extractive merge joins its originals without doubling their punctuation, and
joins only originals of one fact."""

from __future__ import annotations

import re

from mdmem.distill.merge_memories import _join, merge_offline, same_fact
from mdmem.markdown.entries import Entry


def _entry(n: int, text: str) -> Entry:
    return Entry(
        "memory.md", n, n, text, ("Memory",), "item", "fact", 0.5, f"m-{n:010d}",
        created=f"2026-01-{n:02d}",
    )  # fmt: skip


def _merged(*texts: str) -> str:
    """How the merge joins chosen originals (distinct facts here: merge_offline would not)."""
    return _join(list(texts))


def test_a_sentence_that_already_ends_gets_no_extra_full_stop() -> None:
    text = _merged(
        "Alice said the Berlin launch went great!",
        "Bob asked whether port 6543 is open?",
        "Carol waited 12 minutes for the deploy…",
    )
    assert text == (
        "Alice said the Berlin launch went great! Bob asked whether port 6543 is open? "
        "Carol waited 12 minutes for the deploy…"
    )
    ends_in_bang = _merged("Dave runs 3 builds nightly.", "Erin said Tokyo was great!")
    assert ends_in_bang == "Dave runs 3 builds nightly; Erin said Tokyo was great!"


def test_plain_clauses_are_joined_by_semicolons_and_end_with_one_full_stop() -> None:
    text = _merged("Deploys go to Fly.io.", "Backups run at 02:00;", "The Oslo region is ams")
    assert text == "Deploys go to Fly.io; Backups run at 02:00; The Oslo region is ams."
    quoted = _merged('Frank wrote "ship it."', "Grace merged PR 42")
    assert quoted == 'Frank wrote "ship it." Grace merged PR 42.'


def test_originals_of_different_facts_are_never_joined() -> None:
    """Issue 31: three jobs became one memory, and twelve module preferences two naming m0."""
    jobs = [
        _entry(
            n,
            f"The ledger job number {job} runs nightly at 0{job // 10}:15 UTC with timeout {job}s",
        )
        for n, job in enumerate((7, 27, 47), start=1)
    ]
    assert [len(g) for g in same_fact(jobs)] == [1, 1, 1]
    assert merge_offline(jobs).proposals == ()
    modules = [
        _entry(2 * m + k + 1, text.format(m=m))
        for m in range(3)
        for k, text in enumerate(
            (
                "The user prefers type hints on every function in module m{m}",
                "User wants type annotations everywhere in module m{m}",
            )
        )
    ]
    proposals = merge_offline(modules).proposals
    assert len(proposals) == 3  # one per module, each keeping its module
    for proposal in proposals:
        module = set(re.findall(r"\bm\d\b", proposal.text))
        assert len(module) == 1 and len(proposal.sources) == 2
