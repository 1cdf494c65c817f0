"""A journal version's name's time is read without ``strptime`` (whose first call costs a Stop
hook ~20 ms of imports, mdmem/writes/journal.py): the same value, or the same refusal."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from mdmem.writes.journal import Journal, _name_time

DIGITS = st.text(alphabet="0123456789", min_size=1, max_size=1)


def _strptime(stamp: str) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(stamp, "%Y%m%dT%H%M%S.%f")
    except ValueError:
        return None


def _fast(stamp: str) -> dt.datetime | None:
    try:
        return _name_time(stamp)
    except ValueError:
        return None


@given(
    st.lists(DIGITS, min_size=8, max_size=8).map("".join),
    st.lists(DIGITS, min_size=6, max_size=6).map("".join),
    st.lists(DIGITS, min_size=6, max_size=6).map("".join),
)
def test_any_name_of_mdmem_s_width_reads_as_strptime_reads_it(
    day: str, clock: str, micro: str
) -> None:
    stamp = f"{day}T{clock}.{micro}"
    assert _fast(stamp) == _strptime(stamp)


@given(st.datetimes(min_value=dt.datetime(1000, 1, 1)))
def test_every_time_round_trips(when: dt.datetime) -> None:
    stamp = when.strftime("%Y%m%dT%H%M%S.%f")
    assert _name_time(stamp) == when == _strptime(stamp)


@given(st.text(alphabet="0123456789T.-x ", max_size=24))
def test_other_names_as_strptime(stamp: str) -> None:
    assert _fast(stamp) == _strptime(stamp)


def test_a_new_version_s_name_is_read_back(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    path = journal.add("notes/a.md", b"text", "written")
    (entry,) = journal.entries("notes/a.md")
    assert entry.path == path and entry.reason == "written"
    assert abs((dt.datetime.now() - entry.time).total_seconds()) < 3600
