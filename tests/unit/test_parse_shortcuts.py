"""The shortcuts that spare a Stop hook the Markdown parser's and PyYAML's imports (issue 41)
answer exactly what the parsers answer, on the inputs they accept:

- a one-line event of plain words and punctuation is safe in an item without a parse
  (``_PLAIN_LINE`` in mdmem/memory/session_format.py);
- a frontmatter of ``key: value`` lines and flow mappings of bare words reads as PyYAML's
  BaseLoader reads it (``_plain_frontmatter`` in mdmem/markdown/frontmatter.py);
- a bare value with a letter no YAML number holds is not asked of PyYAML
  (``_not_a_number``)."""

from __future__ import annotations

import yaml
from hypothesis import given
from hypothesis import strategies as st

from mdmem.markdown import frontmatter
from mdmem.memory import session_format

PLAIN = st.text(alphabet=st.sampled_from([*"aZ09_ .,;:!?'\"()/@%&+=-", "é", "ß"]), max_size=30)


@given(PLAIN)
def test_a_plain_line_is_what_the_parse_finds_safe(text: str) -> None:
    if not text.strip() or "-->" in text:
        return
    assert session_format._PLAIN_LINE.fullmatch(text)
    assert session_format._block_safe(f"- {text}")


@given(st.text(alphabet=st.sampled_from([*"aZ09_ .:#`~<>-=*+[]\n!"]), min_size=1, max_size=20))
def test_the_plain_line_shortcut_never_says_safe_where_the_parse_does_not(text: str) -> None:
    if session_format._PLAIN_LINE.fullmatch(text) and text.strip():
        assert session_format._block_safe(f"- {text}")


BARE = st.text(alphabet=st.sampled_from([*"aZ09_.:+-xbeT"]), min_size=1, max_size=8)
KEY = st.text(alphabet=st.sampled_from([*"ak_Z9"]), min_size=1, max_size=5)
VALUE = st.one_of(
    BARE,
    st.lists(st.tuples(BARE, BARE), max_size=3).map(
        lambda pairs: "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
    ),
    st.sampled_from(['"quoted"', "", "a b", "[1, 2]", "x #c", "'q'", "~"]),
)


@given(st.lists(st.tuples(KEY, VALUE), min_size=1, max_size=5))
def test_a_plain_frontmatter_reads_as_yaml_reads_it(pairs: list[tuple[str, str]]) -> None:
    block = "".join(f"{k}: {v}\n" for k, v in pairs)
    plain = frontmatter._plain_frontmatter(block)
    if plain is None:
        return
    assert plain == yaml.load(block, Loader=yaml.BaseLoader)


@given(st.text(alphabet=st.sampled_from([*"0123456789abcdefxXoObBeEinfINFT+-._:"]), min_size=1))
def test_not_a_number_only_where_yaml_reads_no_number(text: str) -> None:
    if not frontmatter._SAFE_SCALAR.match(text) or text.endswith(":"):
        return  # (yaml_value quotes these without asking)
    if text.lower() in frontmatter._YAML_WORDS:
        return  # (a boolean or null word ("NO"): YAML is asked before this question is)
    if frontmatter._not_a_number(text):
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError:
            raise AssertionError(f"{text!r}: YAML cannot read it") from None
        assert not isinstance(loaded, bool | int | float) and loaded is not None, text


def test_what_a_session_head_holds_needs_no_yaml() -> None:
    head = (
        "agent: claude-code\nstarted: 2026-03-01T08:00:00\nrounds: 1206\n"
        "tools: {Bash: 3, mcp__x__y: 1}\nsource_digest: 05c4d5f0a3f9a61c\n"
        "imported: 20261128_235054_import\nduration_s: 16011.0\n"
    )
    assert frontmatter._plain_frontmatter(head) == yaml.load(head, Loader=yaml.BaseLoader)
    for value in ("05c4d5f0a3f9a61c", "20261128_235054_import", "2026-03-01T12:26:51"):
        assert frontmatter._not_a_number(value)
    for value in ("0x1f", "1_000", "1:20", "1.5", "0b101", ".inf", "017"):
        assert not frontmatter._not_a_number(value)


# fmt: off
TYPED_BARE = st.one_of(
    st.text(alphabet=st.sampled_from([*"aZ09_.:+-xbeETtzZnoy"]), min_size=1, max_size=10),
    st.sampled_from(
        [
            "yes",
            "No",
            "ON",
            "off",
            "null",
            "NULL",
            "true",
            "False",
            "y",
            "n",
            "0",
            "007",
            "12",
            "1_000",
            "1:20",
            "1.5",
            "1.",
            "1e5",
            "1.5e+3",
            "0x1f",
            "0b101",
            "2026-03-01",
            "2026-3-1",
            "2026-03-01T08:00:05",
            "2026-13-45",
            "2026-03-01T25:00:00",
            "20261129",
            "2026-03-01T08:00:05Z",
            "2026-03-01t08:00:05",
            "7a1b2c3d-0000-4000-8000-0000000000cc",
            "20261128_235054_import",
            "9312.0",
            "_x",
            "x.y",
            "a:b",
            "inf",
            "nan",
        ]
    ),
)
TYPED_VALUE = st.one_of(
    TYPED_BARE,
    st.lists(st.tuples(TYPED_BARE, TYPED_BARE), max_size=3).map(
        lambda pairs: "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
    ),
    st.sampled_from(['"quoted"', "", "a b", "[1, 2]", "x #c", "'q'", "~"]),
)
TYPED_KEY = st.one_of(KEY, st.sampled_from(["yes", "on", "null", "No", "_k", "n"]))


@given(st.lists(st.tuples(TYPED_KEY, TYPED_VALUE), min_size=1, max_size=5))
def test_a_typed_plain_frontmatter_reads_as_the_markdown_reader_reads_it(
    pairs: list[tuple[str, str]],
) -> None:
    """The Markdown reader's frontmatter (python-frontmatter's YAML handler: SafeLoader) read
    without YAML (mdmem/markdown/plain_yaml.py) gives what SafeLoader gives, types included."""
    from frontmatter.default_handlers import YAMLHandler

    from mdmem.markdown.plain_yaml import typed_frontmatter

    block = "".join(f"{k}: {v}\n" for k, v in pairs)
    typed = typed_frontmatter(block)
    if typed is None:
        return
    loaded = YAMLHandler().load(block)
    assert typed == loaded
    assert [type(v) for v in typed.values()] == [type(v) for v in loaded.values()]
    for key, value in typed.items():
        if isinstance(value, dict):
            inner = loaded[key]
            assert [(type(k), type(v)) for k, v in value.items()] == [
                (type(k), type(v)) for k, v in inner.items()
            ]


def test_a_session_head_is_read_without_yaml_as_yaml_reads_it() -> None:
    from frontmatter.default_handlers import YAMLHandler

    from mdmem.markdown.plain_yaml import typed_frontmatter

    head = (
        "agent: claude-code\nstarted: 2026-03-01T08:00:05\nstatus: completed\nrounds: 31\n"
        "source: claude-code\nconversation: 7a1b2c3d-0000-4000-8000-0000000000cc\n"
        "tools: {Bash: 1, Task: 1}\nended: 2026-03-01T10:35:17\nduration_s: 9312.0\n"
        "imported: 20261129_024426_import\nsource_messages: 72\nsource_digest: 05c4d5f0a3f9a61c\n"
    )
    typed = typed_frontmatter(head)
    assert typed is not None and typed == YAMLHandler().load(head)
