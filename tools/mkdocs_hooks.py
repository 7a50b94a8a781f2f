"""MkDocs hooks of the documentation site (mkdocs.yml: ``hooks``).

The guides in ``docs/`` hold their examples as bare doctest blocks (``>>>`` lines and their
output, ended by a blank line), which pytest runs (``--doctest-glob='*.md'``). Markdown would
render them as paragraphs, so each such block is wrapped in a ``pycon`` code fence when the page
is rendered; the files themselves stay as they are, and so do their doctests.
"""

from __future__ import annotations

from typing import Any

_PROMPTS = (">>>", "...")


def _is_prompt(line: str) -> bool:
    stripped = line.lstrip()
    return any(stripped == p or stripped.startswith(p + " ") for p in _PROMPTS)


def fence_doctests(markdown: str) -> str:
    """Wrap each bare doctest block (outside code fences) in a ``pycon`` fence."""
    out: list[str] = []
    in_fence = False
    in_block = False
    for line in markdown.split("\n"):
        if not in_block and line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        elif not in_fence and not in_block and _is_prompt(line):
            in_block = True
            out.append("```pycon")
        elif in_block and not line.strip():
            in_block = False
            out.append("```")
        out.append(line)
    if in_block:
        out.append("```")
    return "\n".join(out)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs hook: fence the page's doctest blocks before it is rendered."""
    return fence_doctests(markdown)
