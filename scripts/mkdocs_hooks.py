"""MkDocs hooks for the docs site (mkdocs.yml ``hooks:``).

The docstrings cross-reference in Sphinx's roles (``:meth:`search```), which the type checker's
and the editor's tooltips read as they are; mkdocstrings renders their markdown and leaves the
role's name in front of the code span. Here the role goes, and a ``~`` reference is shown by
its last name, as Sphinx shows it.
"""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:meth|class|func|data|attr|mod|exc|obj|const):<code>(~?)([^<]*)</code>")


def _shown(match: re.Match[str]) -> str:
    short, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if short else target}</code>"


def on_page_content(html: str, **_: Any) -> str:
    return ROLE.sub(_shown, html)
