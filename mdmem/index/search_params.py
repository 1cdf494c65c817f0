"""The parameters of a search, and every option of ``mdmem search``, declared once.

Five ways in take them: :class:`~mdmem.index.request.SearchRequest` (``Workspace.search``'s
keywords and the warm server's request), the typer command ``mdmem search``, the console's
fast path that reads ``mdmem search`` without typer (:mod:`mdmem.console`), and the ``search``
tool of both MCP servers. Each builds what it needs from :data:`SEARCH_OPTIONS` (typer's
parameters, the fast path's tables, the MCP tools' signatures); a test fails when one of them
takes an option this list lacks, or lacks one it has.

Only the standard library, and neither ``typing`` nor ``dataclasses``: the console's fast path
imports this module, and each of those costs it milliseconds.
"""

from __future__ import annotations

PARAMETER = "parameter"
"""A search parameter: every way in takes it (the MCP tools unless ``mcp`` is None)."""
OUTPUT = "output"
"""An option of ``mdmem search`` only, on how it answers (``--explain``, ``--json`` …): the
fast path reads it."""
REMOTE = "remote"
"""An option of a remote reader's ``mdmem search`` (no files, no warm server): typer's only."""

MODES = ("hybrid", "keyword", "vector")
"""What ``mode`` takes."""


class SearchOption:
    """One option of a search, as each way in spells it.

    ``name``: the keyword (``SearchRequest.of``, the MCP argument, typer's parameter).
    ``flags``: the CLI's declarations as typer takes them (``"--a/--no-a"`` for an on/off
    flag). ``kind``: ``int``, ``str``, ``bool`` or ``mode`` (one of :data:`MODES`).
    ``help``: the CLI's help; None for an option every command shares (``--json``, a remote
    reader's ``--url``), declared with them in ``mdmem/cli/options.py``.
    ``mcp``: the MCP tools' description, or None where the tools do not take it.
    ``at_least``/``mcp_at_most``: bounds (the CLI checks the lower one itself, with its own
    message). ``path_like``: how an MCP argument goes through the one resolver (``glob``).
    """

    __slots__ = (
        "at_least", "default", "flags", "help", "kind", "mcp", "mcp_at_most", "name",
        "path_like", "role",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        flags: tuple[str, ...],
        kind: str,
        help: str | None,
        *,
        role: str = PARAMETER,
        default: object = None,
        mcp: str | None = None,
        at_least: int | None = None,
        mcp_at_most: int | None = None,
        path_like: str | None = None,
    ) -> None:
        self.name = name
        self.flags = flags
        self.kind = kind
        self.help = help
        self.role = role
        self.default = default
        self.mcp = mcp
        self.at_least = at_least
        self.mcp_at_most = mcp_at_most
        self.path_like = path_like

    def __repr__(self) -> str:
        return f"SearchOption({self.name!r}, {self.flags!r})"

    def switches(self) -> dict[str, bool]:
        """An on/off flag's names and the value each sets (``--no-explain``: False)."""
        found: dict[str, bool] = {}
        for flag in self.flags:
            on, _, off = flag.partition("/")
            found[on] = True
            if off:
                found[off] = False
        return found

    def names(self) -> tuple[str, ...]:
        """Every name the CLI accepts for it (``--type``, ``-t``; both of an on/off flag)."""
        return tuple(self.switches()) if self.kind == "bool" else self.flags


SEARCH_OPTIONS = (
    SearchOption(
        "k", ("-k",), "int", "How many hits (default: search.k).",
        mcp="How many hits.", at_least=1, mcp_at_most=100,
    ),
    SearchOption(
        "mode", ("--mode",), "mode", "hybrid, keyword or vector (default: search.mode).",
        mcp="hybrid (keyword and meaning, fused), keyword or vector (default: the "
        "workspace's search.mode).",
    ),
    SearchOption(
        "type", ("--type", "-t"), "str", "Only this type.",
        mcp="Only this type: preference, fact, pattern, skill …",
    ),
    SearchOption(
        "path", ("--path",), "str", "Only files matching this glob.",
        mcp="Only files matching this glob.", path_like="glob",
    ),
    SearchOption(
        "agent", ("--agent",), "str", "Only this agent's files.",
        mcp="Only this agent's sessions.",
    ),
    SearchOption(
        "session", ("--session",), "str", "Only this session.", mcp="Only this session (id).",
    ),
    SearchOption(
        "since", ("--since",), "str", "Created on or after (YYYY-MM-DD).",
        mcp="Created on or after YYYY-MM-DD.",
    ),
    SearchOption(
        "until", ("--until",), "str", "Created on or before (YYYY-MM-DD).",
        mcp="Created on or before YYYY-MM-DD.",
    ),
    SearchOption(
        "include_archived",
        ("--include-archived/--no-include-archived", "--archived/--no-archived"),  # (its
        # name before issue 42, in scripts; `mdmem entries` takes the same flag)
        "bool", "Include archived entries.", default=False,
        mcp="Also search ## Archive sections (superseded and consolidated entries).",
    ),
    SearchOption(
        "scopes", ("--scope",), "str", "Only these scopes: local,shared,inherited,global.",
    ),
    SearchOption(
        "explain", ("--explain/--no-explain",), "bool", "Show every part of each score.",
        role=OUTPUT, default=False,
    ),
    SearchOption(
        "no_server", ("--no-server",), "bool", "Search in-process even if a server runs.",
        role=OUTPUT, default=False,
    ),
    SearchOption(
        "verbose", ("--verbose", "-v"), "bool", "Say who answered and how fast.",
        role=OUTPUT, default=False,
    ),
    SearchOption("as_json", ("--json",), "bool", None, role=OUTPUT, default=False),
    SearchOption("url", ("--url",), "str", None, role=REMOTE),
    SearchOption("index_workspace", ("--index-workspace",), "str", None, role=REMOTE),
)  # fmt: skip
"""Every option of ``mdmem search``, in the order its help lists them; the search parameters
first, in the order ``SearchRequest.params`` and the MCP tools list them."""

SEARCH_PARAMS = tuple(o.name for o in SEARCH_OPTIONS if o.role == PARAMETER)
"""What a search takes besides its query, by name: ``Workspace.search``'s keyword parameters,
the warm server's request and the options of ``mdmem search`` (one list; tests compare them)."""
