"""A whole task loop through the library, on a workspace like example_workspace/.

    python examples/agent_loop.py PATH     (PATH: a copy of example_workspace/; it is modified)

The "agent" here is scripted (no LLM), so the run is deterministic; a real agent would send
``ctx.text`` as its system prompt's memory section each turn. Everything it does lands in
readable files: open them while it runs, or after.
"""

from __future__ import annotations

import sys

from mdmem import Workspace


def full_mode(ws: Workspace) -> None:
    print(f"== full mode: {ws.root}")
    with ws.session("Finish gap-free invoice numbering", agent="coder") as s:
        s.request("Finish the numbering task from the review of PR #9, then push.")
        while (item := ws.task.current()) is not None:
            s.round()
            ctx = ws.build_context(item.text, budget_tokens=1200, model="gpt-4o")
            used = ", ".join(
                f"{x.name} {x.used}" + (f" (-{x.omitted})" if x.omitted else "")
                for x in ctx.sources
            )
            print(
                f"turn {s.rounds}: TODO {item.n} '{item.text[:50]}' | context {ctx.tokens} "
                f"tokens: {used}"
            )
            s.event("planning", f"TODO {item.n}: {item.text}")
            s.tool("shell", "uv run pytest -q", "28 passed in 6.1s")
            if "concurrency" in item.text:
                ws.world.set("tests", "28 passed locally (incl. 20-way concurrency test)")
            if "Push" in item.text:
                ws.world.set("branch", "feat/invoice-status (PR #9), pushed; CI running")
                ws.task.set_phase("review")
            ws.task.complete(item.n)
            s.event("complete", f"TODO {item.n} done")
        s.response("All TODO items are done; pushed and re-requested review.")
    print(f"session written to {s.path}")
    print(f"task phase now: {ws.task.phase}; world 'tests': {ws.world.get('tests')}")


def minimal_mode(ws: Workspace) -> None:
    created = ws.set_mode("minimal")
    print(f"\n== minimal mode (created: {created or 'nothing'}; no file deleted)")
    with ws.session("quick question") as s:  # kept in memory: minimal writes no session file
        s.request("Which port does the test database use?")
        ctx = ws.build_context("test database port", budget_tokens=400)
        s.response("5433 locally; 5432 in CI.")
    print(ctx.text)
    print(
        f"-- {ctx.tokens} of {ctx.budget} tokens; sources: "
        + ", ".join(f"{x.name} {x.used} used, {x.omitted} omitted" for x in ctx.sources)
    )
    ws.set_mode("full")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with Workspace.open(sys.argv[1]) as workspace:
        full_mode(workspace)
        minimal_mode(workspace)
