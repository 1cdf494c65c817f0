"""A session file's frontmatter reads back, with any YAML reader, as the values written: an id
such as ``0000``, ``1e5`` or ``true`` stays a string (it was read as 0, 100000.0, True)."""

from __future__ import annotations

import datetime as dt

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from mdmem.markdown.frontmatter import _SAFE_SCALAR
from mdmem.markdown.frontmatter import yaml_value as _yaml_value

ids = st.from_regex(_SAFE_SCALAR, fullmatch=True) | st.text(min_size=1, max_size=30)


@given(ids)
@example("0000")
@example("1e5")
@example("true")
@example("No")
@example("null")
@example("12:30")
@example("0x1F")
@example("0:")
@example("\x7f")
@example("\x85")
def test_a_string_reads_back_as_the_same_string(text: str) -> None:
    loaded = yaml.safe_load(f"conversation: {_yaml_value(text)}\n")["conversation"]
    if isinstance(loaded, dt.date):  # an ISO timestamp is written bare on purpose: a date
        return
    assert loaded == text


def test_numbers_and_flags_stay_what_they_are() -> None:
    assert yaml.safe_load(_yaml_value(3)) == 3
    assert yaml.safe_load(_yaml_value(0.25)) == 0.25
    assert yaml.safe_load(_yaml_value(True)) is True
