"""The redactor on a corpus nobody on this project wrote: detect-secrets' test data.

    .venv/bin/python benchmarks/redaction_vendored.py [--json]

``../shared/vendor/detect-secrets-test-data.tar.gz`` (Yelp/detect-secrets ``test_data/``,
Apache-2.0, unmodified) is extracted to a temporary folder; nothing of it is copied here. Each of
its files is redacted whole, as if pasted into a memory. :data:`SECRETS` labels the secrets in it
(file, line, the secret, its type), by the type names detect-secrets' own plugins use; a secret
counts as caught only when every character of it is masked. Every other masked span is a false
positive, except on the lines of :data:`UNSURE`, where a reader cannot tell (an INI ``keyA =`` or
a YAML ``other_value_here:`` holding a short number): spans there are neither. The labels are
this project's reading of the files, with detect-secrets' baseline (``test_data/baseline.file``)
as a second opinion: its hex hashes in ``sample.diff`` and its ``*_id`` values are not secrets
here, as its own filters say.
"""

from __future__ import annotations

import argparse
import json
import tarfile
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARBALL = REPO.parent / "shared" / "vendor" / "detect-secrets-test-data.tar.gz"
ROOT = "detect-secrets-test-data/test_data"

KEYWORD = "keyword (password=, secret:, api_key:)"
ENTROPY = "high entropy, neutral name"
AWS = "AWS key"
BASIC_AUTH = "basic auth (URL)"
PRIVATE_KEY = "private key"

SECRETS: tuple[tuple[str, int, str, str], ...] = (
    ("config.env", 1, "gX69YO4CvBsVjzAwYxdGyDd30t5+9ez31gKATtj4", ENTROPY),
    ("config.ini", 2, "123456789a1234", KEYWORD),
    ("config.ini", 10, "23456789a1", KEYWORD),
    ("config.ini", 26, "12345678901234", KEYWORD),
    ("config.ini", 32, "vh987tyw9ehy8ghis7vwyhiwbwitefy7w3ASDGYDGUASDG", KEYWORD),
    ("config.md", 10, "ToCynx5Se4e2PtoZxEhW7lUJcOX15c54", KEYWORD),
    ("config.yaml", 5, "AKIATESTTESTTESTTEST", AWS),
    ("config.yaml", 12, "ToCynx5Se4e2PtoZxEhW7lUJcOX15c54", KEYWORD),
    ("config.yaml", 13, "MjNjcnh1IDJieXJpdXYyeXJpaTJidnl1MnI4OXkyb3UwMg", KEYWORD),
    ("config2.yaml", 2, "MmIwMDA0MmY3NDgxYzdiMDU2YzRiNDEwZDI4ZjMzY2Y", KEYWORD),
    (
        "each_secret.py",
        4,
        "c2VjcmV0IG1lc3NhZ2Ugc28geW91J2xsIG5ldmVyIGd1ZXNzIG15IHBhc3N3b3Jk",
        KEYWORD,
    ),
    ("each_secret.py", 5, "8b1118b376c313ed420e5133ba91307817ed52c2", KEYWORD),
    ("each_secret.py", 6, "whywouldyouusehttpforpasswords", BASIC_AUTH),
    ("each_secret.py", 8, "AKIAIOSFODNN7EXAMPLE", AWS),
    ("each_secret.py", 9, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", AWS),
    (
        "files/file_with_secrets.py",
        3,
        "c3VwZXIgbG9uZyBzdHJpbmcgc2hvdWxkIGNhdXNlIGVub3VnaCBlbnRyb3B5",
        ENTROPY,
    ),
    ("files/file_with_secrets.py", 4, "f6CGV4aMM9zedoh3OUNbSakBymo7yplB", KEYWORD),
    ("files/tmp/file_with_secrets.py", 3, "60b725f10c9c85c70d97880dfe8191b3", KEYWORD),
    ("files/tmp/file_with_secrets.py", 3, "3b5d5c3712955042212316173ccf37be", KEYWORD),
    (
        "files/private_key",
        2,
        "somethingSuperRandomAndSecretHereThatShouldNeverBeShared",
        PRIVATE_KEY,
    ),
    ("short_files/first_line.php", 1, "notHighEnoughEntropy", KEYWORD),
    ("short_files/last_line.ini", 3, "hunter2", KEYWORD),
    ("short_files/last_line.ini", 4, "password123", KEYWORD),
    ("short_files/last_line.ini", 5, "BEEF0123456789a", KEYWORD),
    ("short_files/middle_line.yml", 4, "thequickbrownfoxjumpsoverthelazydog", KEYWORD),
)
"""(file, line, secret, type)."""

UNSURE: frozenset[tuple[str, int]] = frozenset(
    {
        ("config.ini", 6),  # keyA = 678912345: an INI key named key…, or a key?
        ("config.ini", 7),
        ("config.ini", 14),  # keyA's and keyB's multi-line values
        ("config.ini", 15),
        ("config.ini", 18),
        ("config.ini", 21),
        ("config.ini", 22),
        ("config.yaml", 3),  # other_value_here: 1234567890a
    }
)


@dataclass(frozen=True)
class Result:
    caught: dict[str, tuple[int, int]]
    """type → (caught, labelled)."""
    missed: tuple[str, ...]
    """``file:line: secret (type)`` of each labelled secret not wholly masked."""
    false_positives: tuple[str, ...]
    """``file:line: text`` of each span on a line that holds no labelled secret."""
    files: int

    @property
    def recall(self) -> float:
        caught = sum(c for c, _ in self.caught.values())
        return caught / sum(n for _, n in self.caught.values())

    def to_dict(self) -> dict[str, object]:
        return {
            "recall": round(self.recall, 3),
            "by_type": {k: {"caught": c, "of": n} for k, (c, n) in self.caught.items()},
            "missed": list(self.missed),
            "false_positives": list(self.false_positives),
            "files": self.files,
        }


def extract(to: Path, tarball: Path = TARBALL) -> Path:
    with tarfile.open(tarball) as archive:
        archive.extractall(to, filter="data")
    return to / ROOT


def measure(folder: Path) -> Result:
    from mdmem.redact import DEFAULT

    labelled: dict[str, list[tuple[int, str, str]]] = {}
    for name, line, secret, kind in SECRETS:
        labelled.setdefault(name, []).append((line, secret, kind))
    caught: Counter[str] = Counter()
    total: Counter[str] = Counter()
    missed: list[str] = []
    false_positives: list[str] = []
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    for path in files:
        rel = path.relative_to(folder).as_posix()
        text = path.read_text(encoding="utf-8", errors="replace")
        spans = DEFAULT.find(text)
        starts = _line_starts(text)
        secrets: list[tuple[int, int]] = []
        for line, secret, kind in labelled.get(rel, []):
            total[kind] += 1
            at = text.find(secret, starts[line - 1])
            if at < 0 or text.count("\n", 0, at) != line - 1:
                raise ValueError(f"{rel}:{line}: the label {secret!r} is not on that line")
            secrets.append((at, at + len(secret)))
            if all(any(s.start <= i < s.end for s in spans) for i in range(at, at + len(secret))):
                caught[kind] += 1
            else:
                missed.append(f"{rel}:{line}: {secret} ({kind})")
        for span in spans:
            line = text.count("\n", 0, span.start) + 1
            if any(span.start < end and start < span.end for start, end in secrets):
                continue
            if (rel, line) not in UNSURE:
                false_positives.append(f"{rel}:{line}: {text[span.start : span.end][:60]}")
    by_type = {k: (caught[k], total[k]) for k in sorted(total)}
    return Result(by_type, tuple(missed), tuple(false_positives), len(files))


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts += [n + 1 for n, ch in enumerate(text) if ch == "\n"]
    return starts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(extract(Path(tmp)))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return
    print(f"{result.files} files, {len(SECRETS)} labelled secrets, recall {result.recall:.3f}")
    for kind, (n, of) in result.caught.items():
        print(f"  {kind}: {n} of {of}")
    print(f"missed: {len(result.missed)}")
    for line in result.missed:
        print(f"  {line}")
    print(f"false positives: {len(result.false_positives)}")
    for line in result.false_positives:
        print(f"  {line}")


if __name__ == "__main__":
    main()
