"""Text for the keyword index: CJK segmentation and FTS5 queries that can never fail to parse.

SQLite's unicode61 tokenizer keeps a run of Chinese characters as one token, so two-character
words never match. Runs of CJK text are segmented with jieba (loaded lazily, only for text that
has CJK in it) and the words joined by spaces, both when indexing and when querying. Japanese
katakana words and hiragana runs are kept whole; their kanji go through jieba.
"""

from __future__ import annotations

import re
from functools import lru_cache

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]+")
# Japanese: jieba knows Chinese words, so katakana words and hiragana runs are kept whole.
_KANA_RUN = re.compile(r"([\u30a0-\u30ff\uff66-\uff9f]+|[\u3040-\u309f]+)")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)

STOPWORDS = frozenset(
    """a about above after again all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from had has
    have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves s t don didn doesn
    isn wasn weren won wouldn shouldn couldn d ll m re ve done get got go going also like
    likely""".split()
)


def has_cjk(text: str) -> bool:
    return _CJK.search(text) is not None


@lru_cache(maxsize=1)
def _jieba():  # type: ignore[no-untyped-def]
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def segment(text: str) -> str:
    """Split CJK runs into words separated by spaces; other text is returned as it is."""
    if not has_cjk(text):
        return text
    jieba = _jieba()

    def cut(match: re.Match[str]) -> str:
        words: list[str] = []
        for piece in _KANA_RUN.split(match.group(0)):
            if not piece:
                continue
            if _KANA_RUN.fullmatch(piece):  # a katakana word or a run of hiragana: keep whole
                words.append(piece)
            else:
                words.extend(w for w in jieba.cut_for_search(piece) if w.strip())
        return " " + " ".join(words) + " "

    return _CJK.sub(cut, text)


def query_terms(query: str) -> list[str]:
    """The words of a user query, CJK segmented, lower-cased, stopwords dropped (unless the
    query is nothing but stopwords), duplicates removed, in order."""
    words = [w.lower() for w in _WORD.findall(segment(query))]
    kept = [w for w in words if w not in STOPWORDS] or words
    return list(dict.fromkeys(kept))


def fts_query(query: str) -> str | None:
    """An FTS5 MATCH expression for any user text: each term quoted, OR-ed together.

    Quoting makes every term a literal string, so ``AND``, ``*``, ``-``, ``"`` or emoji in the
    query can never be an FTS5 syntax error. Returns None when the query has no words at all.
    """
    terms = query_terms(query)
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
