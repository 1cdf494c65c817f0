"""The CLI's log lines go to stderr as it is when they are written: a background thread (a late
save merged, the watcher) that logs after stderr was swapped and the old one closed writes to
the new one, instead of failing with "I/O operation on closed file"."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from mdmem.cli import output


def test_a_line_logged_after_stderr_was_swapped_lands_in_the_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    logger = logging.getLogger("mdmem")
    saved = (list(logger.handlers), logger.level)
    monkeypatch.setattr(logger, "handlers", [])
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    try:
        output.log_to_stderr()
        logger.info("%s: merged", "a.md")
        assert first.getvalue() == "mdmem: a.md: merged\n"
        first.close()  # as a test runner closes its capture
        second = io.StringIO()
        monkeypatch.setattr(sys, "stderr", second)
        logger.info("%s: merged", "b.md")
        assert second.getvalue() == "mdmem: b.md: merged\n"
    finally:
        logger.handlers, logger.level = saved
