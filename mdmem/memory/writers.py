"""Where a program write goes: to disk through the safe writes, or, in a dry run, to copies in
memory that report their diff. Stores take a :class:`Writer`, so a dry run is an argument, not
a mode hidden in global state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from mdmem.errors import ScopeError
from mdmem.markdown.parse import Document, parse_document
from mdmem.memory.documents import Documents
from mdmem.memory.structure import structural_fields
from mdmem.redact import Field, Redactor, SecretInField
from mdmem.writes.file_state import Target
from mdmem.writes.safe_writer import EditFile, SafeWriter

Edit = Callable[[str], str]
NOTES_DIR = ".notes"
"""Agents' private notes: ``.notes/<agent>/`` is the LOCAL memory of that agent."""


class Writer(Protocol):
    def write(
        self,
        rel: str,
        edit: Edit,
        *,
        create: bool = True,
        exact: bool = False,
        committed: Callable[[str], None] | None = None,
    ) -> str:
        """Apply ``edit`` (old text → new text) to one workspace file; returns the new text.
        ``exact``: write what the edit returns as it is (a restored version), secrets and all.
        ``committed(text)``: run once it is on disk, under the file's lock (a dry run: never)."""
        ...

    def current(self, rel: str) -> Document | None:
        """The file as this writer would edit it now (None when missing or unreadable)."""
        ...


class FileWriter:
    """Writes to disk through the safe writes; never adds a secret the file did not hold, and
    never writes another agent's private notes (the LOCAL scope)."""

    def __init__(
        self, documents: Documents, safe: SafeWriter, redactor: Redactor, agent: str | None = None
    ) -> None:
        self.documents = documents
        self.safe = safe
        self.redactor = redactor
        self.agent = agent

    def write(
        self,
        rel: str,
        edit: Edit,
        *,
        create: bool = True,
        exact: bool = False,
        committed: Callable[[str], None] | None = None,
    ) -> str:
        where, absolute = self.documents.resolve(rel)
        check_local(where, self.agent)
        if not exact:
            edit = no_new_secrets(self.redactor, edit, rel)
        absolute.parent.mkdir(parents=True, exist_ok=True)  # inside: resolve() checked it
        # a symlink (inside the workspace) is written through, never replaced by a file
        real = absolute.resolve() if absolute.is_symlink() else absolute
        target = Target(real, rel, self.documents.max_file_bytes)
        return self.safe.edit(target, edit, create=create, committed=committed).text

    def current(self, rel: str) -> Document | None:
        return self.documents.or_none(rel)

    def one(self, rel: str, *, create: bool = True) -> EditFile:
        """A function writing this one file (what a session, the task or the world takes)."""
        return lambda edit: self.write(rel, edit, create=create)


class DryRunWriter:
    """Applies edits to copies in memory; :meth:`diff` tells what would have changed."""

    def __init__(self, documents: Documents, redactor: Redactor) -> None:
        self.documents = documents
        self.redactor = redactor
        self.texts: dict[str, str] = {}
        self.originals: dict[str, str] = {}

    def write(
        self,
        rel: str,
        edit: Edit,
        *,
        create: bool = True,
        exact: bool = False,
        committed: Callable[[str], None] | None = None,
    ) -> str:
        if not exact:
            edit = no_new_secrets(self.redactor, edit, rel)
        if rel not in self.texts:
            exists = (self.documents.root / rel).exists()
            self.originals[rel] = self.documents.read(rel).text if exists else ""
        self.texts[rel] = edit(self.texts.get(rel, self.originals[rel]))
        return self.texts[rel]

    def current(self, rel: str) -> Document | None:
        if rel in self.texts:
            return parse_document(rel, self.texts[rel])
        return self.documents.or_none(rel)

    def diff(self) -> str:
        from mdmem.reports import unified_diff  # (a dry run's: no hook's)

        return unified_diff(self.originals, self.texts) if self.texts else ""


def check_local(rel: str, agent: str | None) -> None:
    """LOCAL: an agent's private notes, ``.notes/<agent>/``, are written by that agent only.
    ``agent`` None: a writer that speaks for no agent (a person's tool), not checked."""
    parts = rel.split("/")
    if agent is not None and len(parts) > 2 and parts[0] == NOTES_DIR and parts[1] != agent:
        raise ScopeError(
            f"agent {agent!r} may not write {rel}: {NOTES_DIR}/{parts[1]}/ is the LOCAL memory "
            f"of agent {parts[1]!r} (write your own in {NOTES_DIR}/{agent}/, or a SHARED file)"
        )


def no_new_secrets(redactor: Redactor, edit: Edit, rel: str = "") -> Edit:
    """Every program write, whatever made it (task, world, compaction, anything added later),
    never adds a secret the file did not already hold; a person's own text, secrets included,
    is never rewritten for this. The file's structure (ids, keys, mdmem's labels: see
    :mod:`mdmem.memory.structure`) is never rewritten either: a key holding a provider-format
    secret raises SecretInField and nothing is written."""
    if not redactor.enabled:
        return edit

    def fields(text: str, start: int, end: int) -> list[Field]:
        return structural_fields(rel, text, start, end)

    def guarded(current: str) -> str:
        try:
            return redactor.redact_added(current, edit(current), fields).text
        except SecretInField as exc:
            where = rel  # a key can be a file's name too: never show the secret
            for secret in exc.secrets:
                where = where.replace(secret, f"[REDACTED:{exc.kind}]")
            raise SecretInField(exc.name, exc.masked, exc.kind, where, exc.secrets) from None

    return guarded
