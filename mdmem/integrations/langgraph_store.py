"""A LangGraph store (``BaseStore``) kept as Markdown files: ``compile(store=MdmemStore(ws))``.

Namespaces are folders under ``store/`` and each item one file, ``store/<ns>/<...>/<key>.md``::

    ---
    namespace: ["memories", "user-42"]
    key: "food"
    created: "2026-11-22T14:15:19.123456+00:00"
    updated: "2026-11-22T14:15:19.123456+00:00"
    value: {"text": "Likes pizza, hates olives", "confidence": 0.9}
    ---
    text: Likes pizza, hates olives

The ``value`` line is the item, as JSON (what ``get`` returns, exactly); the text below it is
what mdmem indexes, so ``search(query=...)`` runs mdmem's hybrid search (keyword + vector, with
its ranking) over it: by default every field, with ``put(..., index=["text"])`` only those
fields, with ``index=False`` nothing (the item is kept and can be got or listed, but no search
query finds it and nothing is embedded). ``put(ns, key, None)`` (delete) archives the file to
``.trash/store/...``: nothing is lost. ``MdmemStore(ws, index={"dims", "embed", "fields"})``
(LangGraph's index config) ranks a query by the caller's embeddings instead, as
``InMemoryStore`` does. ``filter`` (``{"field": value}`` or ``$eq``, ``$ne``, ``$gt``, ``$gte``,
``$lt``, ``$lte``) and ``match_conditions`` are honoured as in LangGraph's own stores. A TTL
is refused (``NotImplementedError``: ``supports_ttl`` is False) rather than kept and never
honoured. A batch runs its operations in order; many calls may run at once (a
delete takes the same per-file lock as a put, and a file deleted while a search or listing
reads the folder is simply gone from the answer).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

from mdmem.errors import FileProblem

if TYPE_CHECKING:
    from mdmem import Workspace

FOLDER = "store"
TRASH_DIR = ".trash"
_FIELDS = ("namespace", "key", "created", "updated", "index", "value")
_MAX_NAME = 120


class MdmemStore(BaseStore):
    """LangGraph's long-term memory store over an mdmem workspace (see the module's doc).

    ``workspace``: a :class:`~mdmem.Workspace` or its folder; ``folder``: where the namespaces
    go inside it (default ``store``).
    """

    supports_ttl = False

    def __init__(
        self,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        *,
        folder: str = FOLDER,
        index: IndexConfig | None = None,
    ) -> None:
        from mdmem import Workspace

        self.ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace)
        self.folder = folder.strip("/")
        self.ws.files._resolve(self.folder, "store folder")  # inside the workspace, or an error now
        self.index_config: dict[str, Any] | None = None
        self.embeddings: Embeddings | None = None
        self._vectors: dict[str, tuple[tuple[tuple[str, str], ...], list[list[float]]]] = {}
        self._vectors_lock = threading.Lock()
        if index:
            self.index_config = dict(index)
            self.embeddings = ensure_embeddings(index.get("embed"))
            fields = index.get("fields") or dict(index).get("text_fields") or ["$"]
            self._fields = _tokenized([fields] if isinstance(fields, str) else fields)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order (a get after a put in the same batch sees it); one result per
        operation, in the same order. Every operation is checked before the first runs."""
        ops = [_normalized(op) for op in ops]
        for op in ops:
            _check(op)
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            else:
                results.append(self._namespaces(op))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # ---- operations -------------------------------------------------------------------------

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        fields = self._read(self.ws.root / self._rel(namespace, key))
        return None if fields is None else _item(fields)

    def _put(self, op: PutOp) -> None:
        rel = self._rel(op.namespace, op.key)
        if op.value is None:
            self._archive(rel)
            return
        if not isinstance(op.value, Mapping):
            raise TypeError(f"a store value is a dict, got {type(op.value).__name__}")
        value = json.loads(json.dumps(dict(op.value)))  # plain JSON data, or a TypeError now
        now = dt.datetime.now(dt.UTC).isoformat()

        def edit(current: str) -> str:
            created = now
            if current.strip():
                created = _fields(current, rel).get("created", now)
            fields = {
                "namespace": list(op.namespace),
                "key": op.key,
                "created": created,
                "updated": now,
                "index": op.index if op.index is not None else None,
                "value": value,
            }
            return render(fields, _indexed_text(value, op.index))

        self.ws.files.edit(rel, edit)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        wanted = op.offset + op.limit
        if op.query and self.embeddings is not None:
            return self._by_embedding(op)
        if op.query and op.query.strip():
            found = self._ranked(op.namespace_prefix, op.query, wanted, op.filter)
        else:
            items = [_item(f) for f in self._walk(op.namespace_prefix)]
            items = [i for i in items if _matches(i.value, op.filter)]
            items.sort(key=lambda i: i.updated_at, reverse=True)
            found = [_search_item(i, None) for i in items[:wanted]]
        return found[op.offset : wanted]

    def _ranked(
        self, prefix: tuple[str, ...], query: str, wanted: int, filters: Mapping[str, Any] | None
    ) -> list[SearchItem]:
        """Items for ``query`` by mdmem's hybrid search, best first (an item's best passage)."""
        pattern = "/".join([self.folder, *(_name(p) for p in prefix)]) + "/**"
        k = max(wanted * 4, 20)
        while True:
            hits = self.ws.search(query, k=k, path=pattern)
            found: dict[str, SearchItem] = {}
            for hit in hits:
                if hit.path in found or not hit.path.endswith(".md"):
                    continue
                fields = self._read(self.ws.root / hit.path)
                if fields is None:  # deleted since the index saw it
                    continue
                item = _item(fields)
                if _matches(item.value, filters):
                    found[hit.path] = _search_item(item, hit.score)
            if len(found) >= wanted or len(hits) < k:
                return list(found.values())
            k *= 4  # many passages of few items, or a strict filter: look further

    def _by_embedding(self, op: SearchOp) -> list[SearchItem]:
        """Items ranked by the cosine of the caller's embeddings (``index=``), as LangGraph's
        ``InMemoryStore`` ranks them: an item scores its best field's similarity; items with
        nothing to embed (``index=False``) come after the scored ones, unscored, to fill the
        page. Vectors are made when a query first needs them and kept, per item file, while its
        indexed texts stay the same (a file edited by hand or by another process is embedded
        anew)."""
        assert self.embeddings is not None and op.query is not None
        candidates = []
        seen = set()
        for fields in self._walk(op.namespace_prefix):
            item = _item(fields)
            rel = self._rel(item.namespace, item.key)
            seen.add(rel)
            if _matches(item.value, op.filter):
                candidates.append((rel, item, self._texts(item.value, fields.get("index"))))
        prefix = "/".join([self.folder, *(_name(p) for p in op.namespace_prefix)]) + "/"
        with self._vectors_lock:  # searches run at once in abatch's threads
            for rel in [r for r in self._vectors if r.startswith(prefix) and r not in seen]:
                del self._vectors[rel]  # gone from the store: the cache holds only its items
            known = {rel: self._vectors.get(rel) for rel, _, _ in candidates}
        vectors = {rel: cached[1] for rel, cached in known.items() if cached is not None}
        missing = []
        for rel, _, texts in candidates:
            cached = known[rel]
            if texts and (cached is None or cached[0] != texts):  # new, or its texts changed
                missing.append((rel, texts))
        flat = [text for _, texts in missing for _, text in texts]
        if flat:
            made = self._embed(flat)
            if len(made) != len(flat):
                raise ValueError(
                    f"the embedding function gave {len(made)} vectors for {len(flat)} texts"
                )
            at = 0
            for rel, texts in missing:
                vectors[rel] = [list(v) for v in made[at : at + len(texts)]]
                at += len(texts)
                with self._vectors_lock:
                    self._vectors[rel] = (texts, vectors[rel])
        query = self._embed([op.query], query=True)[0]
        scored, scoreless = [], []
        for rel, item, texts in candidates:
            if not texts:
                scoreless.append(item)
                continue
            score = max(_cosine(query, vector) for vector in vectors[rel])
            scored.append((score, item))
        scored.sort(key=lambda pair: pair[0], reverse=True)
        kept: list[tuple[float | None, Item]] = list(scored[op.offset : op.offset + op.limit])
        if scoreless and len(kept) < op.limit:
            kept += [(None, item) for item in scoreless[: op.limit - len(kept)]]
        return [_search_item(item, score) for score, item in kept]

    def _embed(self, texts: list[str], *, query: bool = False) -> list[list[float]]:
        """The caller's vectors for ``texts``; an ``async def`` embed function (LangGraph wraps
        it with no sync side) is run to its end here, in the thread the batch runs in."""
        embeddings = self.embeddings
        assert embeddings is not None
        if hasattr(embeddings, "afunc") and getattr(embeddings, "func", None) is None:
            if query:
                return [asyncio.run(embeddings.aembed_query(texts[0]))]
            return asyncio.run(embeddings.aembed_documents(texts))
        return [embeddings.embed_query(texts[0])] if query else embeddings.embed_documents(texts)

    def _texts(self, value: Mapping[str, Any], index: Any) -> tuple[tuple[str, str], ...]:
        """(path, text) for each text of an item the caller's embeddings rank it by."""
        if index is False:
            return ()
        paths = self._fields if index is None else _tokenized(index)
        out: list[tuple[str, str]] = []
        for path, tokens in paths:
            texts = get_text_at_path(dict(value), tokens)
            out += [(f"{path}.{i}" if len(texts) > 1 else path, t) for i, t in enumerate(texts)]
        return tuple(out)

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces: set[tuple[str, ...]] = set()
        for fields in self._walk(()):
            namespace = tuple(fields["namespace"])
            if not all(_condition(namespace, c) for c in op.match_conditions or ()):
                continue
            if op.max_depth is not None:
                namespace = namespace[: op.max_depth]
            spaces.add(namespace)
        return sorted(spaces)[op.offset : op.offset + op.limit]

    # ---- files ------------------------------------------------------------------------------

    def _rel(self, namespace: tuple[str, ...], key: str) -> str:
        if not namespace:
            raise ValueError("a namespace needs at least one label")
        parts = [self.folder, *(_name(label) for label in namespace), _name(str(key)) + ".md"]
        rel, _ = self.ws.files._resolve("/".join(parts), "store item")
        return rel

    def _read(self, absolute: Path) -> dict[str, Any] | None:
        """An item file's fields; None when there is no such file (a delete running beside
        this read may archive it between a listing and the read: the item is gone, not bad)."""
        rel = absolute.relative_to(self.ws.root).as_posix()
        try:
            text = absolute.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise FileProblem(rel, f"cannot be read: {exc}") from None
        return _fields(text, rel)

    def _walk(self, prefix: tuple[str, ...]) -> Iterator[dict[str, Any]]:
        top = self.ws.root / self.folder / Path(*(_name(p) for p in prefix)) if prefix else None
        top = top or self.ws.root / self.folder
        if not top.is_dir():
            return
        for folder, dirs, files in os.walk(top):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(".md") and not name.startswith("."):
                    fields = self._read(Path(folder) / name)
                    if fields is not None and tuple(fields["namespace"][: len(prefix)]) == prefix:
                        yield fields

    def _archive(self, rel: str) -> None:
        """Move an item's file to ``.trash/`` (the same path below it), never over another.

        Under the file's write lock, the one every put of the same item holds: a put running
        beside the delete never finds its file moved away halfway through its write."""
        source = self.ws.root / rel
        with self.ws.files._locked(rel, rel):
            if not source.exists():
                return
            target = self.ws.root / TRASH_DIR / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            stamp = dt.datetime.now().strftime("%Y%m%d_%H%M%S")
            n = 1
            while target.exists():
                n += 1
                target = target.with_name(f"{Path(rel).stem}.{stamp}-{n}.md")
            os.rename(source, target)


def _normalized(op: Op) -> Op:
    """``op`` with its namespace (or prefix) a tuple: ``search(["docs"])`` with a list, as
    SqliteStore takes it, finds what ``search(("docs",))`` finds, with or without a query."""
    if isinstance(op, GetOp | PutOp) and isinstance(op.namespace, list):
        return op._replace(namespace=tuple(op.namespace))
    if isinstance(op, SearchOp) and isinstance(op.namespace_prefix, list):
        return op._replace(namespace_prefix=tuple(op.namespace_prefix))
    return op


def _check(op: Op) -> None:
    """Refuse what the store cannot do before anything runs: an unknown operation, a TTL (the
    store declares ``supports_ttl = False``, as ``put`` itself checks), a bad namespace label
    (the rules of ``BaseStore.put``, for operations given to ``batch`` directly)."""
    if isinstance(op, GetOp | PutOp):
        labels = op.namespace
    elif isinstance(op, SearchOp):
        labels = op.namespace_prefix
    elif isinstance(op, ListNamespacesOp):
        labels = tuple(p for c in op.match_conditions or () for p in c.path if p != "*")
    else:
        raise TypeError(f"unknown store operation: {type(op).__name__}")
    if isinstance(op, PutOp) and op.ttl is not None:
        raise NotImplementedError(
            "TTL is not supported by MdmemStore (supports_ttl is False): the item would never "
            "expire. Put it with ttl=None, or delete it when it is no longer wanted."
        )
    for label in labels:
        if not isinstance(label, str) or not label or "." in label or "\0" in label:
            raise InvalidNamespaceError(
                f"invalid namespace label {label!r} in {tuple(labels)}: a label is a non-empty "
                "string without '.' or NUL"
            )


# ---- the item file ---------------------------------------------------------------------------


def render(fields: Mapping[str, Any], body: str) -> str:
    """An item's file: one JSON value per frontmatter line (JSON is YAML too), then the text
    mdmem indexes."""
    lines = ["---"]
    for name in _FIELDS:
        if fields.get(name) is not None:
            lines.append(f"{name}: {json.dumps(fields[name], ensure_ascii=True)}")
    lines.append("---")
    return "\n".join(lines) + "\n" + (body + "\n" if body else "")


def _fields(text: str, rel: str) -> dict[str, Any]:
    """The frontmatter an item's file holds (the lines :func:`render` writes)."""
    lines = text.removeprefix("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise FileProblem(rel, "not a store item: no frontmatter", 1)
    fields: dict[str, Any] = {}
    for number, line in enumerate(lines[1:], 2):
        if line.strip() == "---":
            break
        name, sep, raw = line.partition(":")
        if not sep or name.strip() not in _FIELDS:
            continue
        try:
            fields[name.strip()] = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise FileProblem(rel, f"{name.strip()}: not JSON ({exc.msg})", number) from None
    else:
        raise FileProblem(rel, "the frontmatter has no closing '---'", 1)
    missing = [f for f in ("namespace", "key", "value") if f not in fields]
    if missing:
        raise FileProblem(rel, f"not a store item: no {', '.join(missing)}", 1)
    if not isinstance(fields["value"], dict):
        raise FileProblem(rel, "value: not a JSON object", 1)
    return fields


def _indexed_text(value: Mapping[str, Any], index: Any) -> str:
    """What search sees: ``field: text`` for each field (or for the paths ``index`` lists)."""
    if index is False:
        return ""
    if isinstance(index, list):
        parts = [t for path in index for t in get_text_at_path(dict(value), path) if t]
        return "\n\n".join(_safe(t) for t in parts)
    out = []
    for name, field in value.items():
        text = field if isinstance(field, str) else json.dumps(field, ensure_ascii=False)
        out.append(_safe(f"{name}: {text}"))
    return "\n\n".join(out)


def _safe(text: str) -> str:
    """Text that stays text in Markdown: no line reads as a heading, a fence or frontmatter."""
    lines = []
    for line in str(text).replace("\r\n", "\n").split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(("#", "```", "~~~", "---", "===", "<!--")):
            line = "\\" + stripped
        lines.append(line)
    return "\n".join(lines).strip()


def _item(fields: Mapping[str, Any]) -> Item:
    return Item(
        value=fields["value"],
        key=str(fields["key"]),
        namespace=tuple(fields["namespace"]),
        created_at=_time(fields.get("created")),
        updated_at=_time(fields.get("updated")),
    )


def _search_item(item: Item, score: float | None) -> SearchItem:
    return SearchItem(
        item.namespace, item.key, item.value, item.created_at, item.updated_at, score=score
    )


def _time(value: Any) -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(str(value))
    except ValueError:
        return dt.datetime.fromtimestamp(0, dt.UTC)


EMPTY_NAME = "%"
"""The file name of the empty key (``put(ns, "", …)``, which LangGraph's stores take): a lone
``%`` is no percent-encoding of any other key."""


def _name(label: str) -> str:
    """A namespace label or key as a file name: characters a file name cannot hold, and a
    leading dot, percent-encoded (the frontmatter keeps the label itself)."""
    name = quote(label, safe="@+=,;!()")
    if name.startswith("."):
        name = "%2E" + name[1:]
    if not name:
        return EMPTY_NAME  # (an empty namespace label is refused before: _check)
    if len(name) > _MAX_NAME:
        import hashlib

        name = name[:_MAX_NAME] + "-" + hashlib.sha256(label.encode()).hexdigest()[:12]
    return name


def _tokenized(paths: Iterable[str]) -> list[tuple[str, Any]]:
    """Each field path with its tokens, as ``get_text_at_path`` takes them (``$``, the whole
    value, as is)."""
    return [(p, p if p == "$" else tokenize_path(p)) for p in paths]


def _cosine(a: list[float], b: list[float]) -> float:
    """The cosine similarity of two vectors (0.0 when either is all zeros)."""
    import numpy as np

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    norms = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(x @ y / norms) if norms else 0.0


def _condition(namespace: tuple[str, ...], condition: Any) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(want == "*" or want == got for want, got in zip(path, part, strict=True))


def _matches(value: Mapping[str, Any], filters: Mapping[str, Any] | None) -> bool:
    """Whether ``value`` passes a LangGraph filter (exact values, or ``$eq`` … ``$lte``)."""
    for field, wanted in (filters or {}).items():
        found = _at(value, field)
        if isinstance(wanted, Mapping) and wanted and all(k.startswith("$") for k in wanted):
            if not all(_compare(found, op, v) for op, v in wanted.items()):
                return False
        elif found != wanted:
            return False
    return True


def _at(value: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _compare(found: Any, op: str, wanted: Any) -> bool:
    if op == "$eq":
        return found == wanted
    if op == "$ne":
        return found != wanted
    try:
        if op == "$gt":
            return found > wanted
        if op == "$gte":
            return found >= wanted
        if op == "$lt":
            return found < wanted
        if op == "$lte":
            return found <= wanted
    except TypeError:
        return False
    raise ValueError(f"unknown filter operator {op!r}: $eq, $ne, $gt, $gte, $lt or $lte")
