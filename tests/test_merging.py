"""The offline extractive merge joins its originals without doubling their punctuation."""

from __future__ import annotations

from mdmem.distill.merging import merge_offline
from mdmem.markdown.entries import Entry


def _entry(n: int, text: str) -> Entry:
    return Entry(
        "memory.md", n, n, text, ("Memory",), "item", "fact", 0.5, f"m-{n:010d}",
        created=f"2026-01-{n:02d}",
    )  # fmt: skip


def _merged(*texts: str) -> str:
    result = merge_offline([_entry(n, t) for n, t in enumerate(texts, start=1)])
    (proposal,) = result.proposals
    assert len(proposal.sources) == len(texts)
    return proposal.text


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
