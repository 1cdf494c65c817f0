"""Search results as ``mdmem search`` prints them: hits for people, JSON for programs, and
the warnings that go with them. Shared by the typer command and the light client
(:mod:`mdmem.live.client`), so both print the same bytes; imports nothing heavy (rich only on
a terminal)."""

from __future__ import annotations

import json
import sys

TYPE_CHECKING = False  # `mdmem search` (mdmem/console.py) does without typing
if TYPE_CHECKING:
    from typing import Any


def print_results(
    data: dict[str, Any],
    query: str,
    *,
    explain: bool,
    as_json: bool,
    against: dict[str, list[str]] | None = None,
) -> None:
    """A search's results (a server's reply or ``SearchResults.to_dict()``), then its
    problems and stale files on stderr. ``against``: open contradictions (id → the memories
    contradicting it), shown under a hit with ``explain``."""
    if as_json:
        print(json.dumps({"query": query, **data}, ensure_ascii=False, indent=2))
    else:
        print_hits(data["hits"], query, explain, against)
    for problem in data.get("problems", []):
        warn(problem)
    for path_ in data["stale"]:
        warn(
            f"{path_} changed but is not re-indexed yet (unreadable, big enough to leave to "
            "`mdmem index`, being indexed by the watcher, or the index is busy or cannot be "
            "written); its last indexed version was searched"
        )


def warn(message: str) -> None:
    print(f"mdmem: warning: {message}", file=sys.stderr)


def print_hits(
    hits: list[dict[str, Any]],
    query: str,
    explain: bool,
    against: dict[str, list[str]] | None = None,
) -> None:
    """Colours on a terminal (rich); plain text in a pipe, without importing rich at all."""
    emit: Any = print
    tag: Any = lambda text, _style: text  # noqa: E731
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.markup import escape

        emit = Console(highlight=False, soft_wrap=True).print
        tag = lambda text, style: f"[{style}]{escape(text)}[/]"  # noqa: E731
    if not hits:
        emit("No results.")
        return
    for n, hit in enumerate(hits, start=1):
        where = f"{hit['path']}:{hit['start_line']}"
        if hit["end_line"] > hit["start_line"]:
            where += f"-{hit['end_line']}"
        if hit.get("scope") in ("INHERITED", "GLOBAL"):  # another workspace's: where it is
            where = f"{hit['workspace']}/{where} ({hit['scope'].lower()})"
        heading = "  " + tag(hit["heading"], "dim") if hit["heading"] else ""
        number, score = f"{n:>2}.", f"{hit['score']:.3f}"
        emit(
            f"{tag(number, 'bold')} {tag(where, 'cyan')}  {tag(hit['type'], 'magenta')}"
            f"{heading}  {tag(score, 'green')}"
        )
        text = snippet(hit["text"], query)
        out, last = [], 0
        for start, end in highlight(text, query):
            out.append(tag(text[last:start], "default") + tag(text[start:end], "bold yellow"))
            last = end
        out.append(tag(text[last:], "default"))
        emit("    " + "".join(out).replace("\n", "\n    "))
        if explain:
            s = hit["scores"]
            kw = "-" if s["keyword"] is None else f"{s['keyword']:.3f}"
            vec = "-" if s["vector"] is None else f"{s['vector']:.3f}"
            parts = (
                f"keyword(bm25)={kw} vector(cos)={vec} relevance={s['relevance']:.3f} "
                f"recency={s['recency']:.3f} importance={s['importance']:.2f} "
                f"frequency={s['frequency']:.3f}"
            )
            emit("    " + tag(parts, "dim"))
            if "floor" in s:  # (an older watcher's reply has no floor)
                emit("    " + tag(why(s), "dim"))
            if against and hit["id"] in against:
                emit("    " + tag(f"contradicted by {', '.join(against[hit['id']])}", "red"))


def why(scores: dict[str, Any]) -> str:
    """Why a hit made the cut: its relevance against the floor, and where it came from."""
    sources = [
        name
        for name, on in (
            ("words matched", scores["keyword"] is not None),
            ("meaning close", scores["vector"] is not None and scores["vector"] > 0),
            (f"context +{scores['context']:.3f}", scores["context"] > 0),
            (f"speaker named +{scores.get('speaker', 0):.0%}", scores.get("speaker", 0) > 0),
            (f"dated as asked +{scores.get('when', 0):.0%}", scores.get("when", 0) > 0),
        )
        if on
    ]
    return (
        f"made the cut: relevance {scores['relevance']:.3f} >= floor {scores['floor']:.2f} "
        f"of the best ({', '.join(sources) or 'no signal'})"
    )


def highlight(text: str, query: str) -> list[tuple[int, int]]:
    """Spans of the query's terms in text: the terms the keyword index searched for."""
    import re

    from mdmem.index.fts import query_terms

    words = [w for w in query_terms(query) if len(w) > 1]
    if not words:
        return []
    pattern = re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)), re.I)
    return [(m.start(), m.end()) for m in pattern.finditer(text)]


def snippet(text: str, query: str, width: int = 300) -> str:
    if len(text) <= width:
        return text
    spans = highlight(text, query)
    start = max(0, spans[0][0] - width // 3) if spans else 0
    piece = text[start : start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")
