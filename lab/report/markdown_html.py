"""The Markdown the report writes, as HTML: headings, paragraphs, bullet lists, pipe tables, fenced code,
links, images, inline code, *emphasis* and **bold**, and nothing more.

The report's sections write a small, fixed subset of Markdown, so a page of converter is enough and the lab
needs no Markdown library: everything else (raw HTML included) is shown as the text it is, escaped. Hooks
let the HTML page put its pictures inline, turn links between the report's files into links within the
page, and render a table of its own (the clickable matrix).
"""

from __future__ import annotations

import re
from html import escape, unescape
from typing import Callable

HEADING = re.compile(r"(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"```")
TABLE_RULE = re.compile(r"\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
BULLET = re.compile(r"[-*+]\s+")
CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)
BACKSLASH = re.compile(r"\\([!-/:-@\[-`{-~])")  # a backslash before ASCII punctuation: the character itself
IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]*)\)")
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]*)\)")
BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", re.S)
# One asterisk each side, never inside a word or a run of asterisks: "2 * 3" and snake*case stay text.
EMPHASIS = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])", re.S)
HOLE = re.compile(r"\x00(\d+)\x00")  # a finished piece of HTML, kept out of the later passes

Image = Callable[[str, str], "str | None"]  # (src, alt) -> the <img> to use, or None for the plain one
Link = Callable[[str], "str | None"]  # href -> the href to use, or None: the text without a link
Table = Callable[[list[str], list[list[str]]], "str | None"]  # (headers, rows) as Markdown -> its HTML, or None


def split_row(line: str) -> list[str]:
    """A pipe-table row's cells, as Markdown: outer pipes dropped, split at every pipe not escaped as \\|."""
    row = line.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", row)]


class MarkdownHtml:
    """One converter per page: it keeps the heading ids it gave, so ids stay unique across the page's files."""

    def __init__(self, image: Image | None = None, link: Link | None = None, table: Table | None = None):
        self.image, self.link, self.table = image, link, table
        self.ids: set[str] = set()
        self.plain: dict[str, str] = {}  # inline() of each text with no image or link: the grids repeat their cells'

    def heading_id(self, text: str) -> str:
        """A stable id for a heading: its words, lower case, joined by '-', numbered when taken."""
        base = re.sub(r"[^a-z0-9]+", "-", unescape(re.sub(r"<[^>]+>", "", text)).lower()).strip("-") or "section"
        name, n = base, 1
        while name in self.ids:
            n += 1
            name = f"{base}-{n}"
        self.ids.add(name)
        return name

    def inline(self, text: str) -> str:
        """One line (or a paragraph's lines) of Markdown as HTML, everything but the subset escaped."""
        if "](" in text:  # an image or a link: the page's hooks place it
            return self._inline(text)
        if text not in self.plain:
            self.plain[text] = self._inline(text)
        return self.plain[text]

    def _inline(self, text: str) -> str:
        holes: list[str] = []

        def hold(piece: str) -> str:
            holes.append(piece)
            return f"\x00{len(holes) - 1}\x00"

        def code(match: re.Match) -> str:
            body = match.group(2)
            if body.startswith(" ") and body.endswith(" ") and body.strip():
                body = body[1:-1]
            return hold(f"<code>{escape(body, quote=False)}</code>")

        def plain(segment: str) -> str:
            segment = BACKSLASH.sub(lambda m: hold(escape(m.group(1), quote=False)), segment)
            return escape(segment, quote=False)

        pieces, at = [], 0
        for match in CODE_SPAN.finditer(text):
            pieces += [plain(text[at:match.start()]), code(match)]
            at = match.end()
        out = "".join(pieces) + plain(text[at:])
        out = IMAGE.sub(lambda m: hold(self._image(unescape(self._restore(m.group(2), holes)),
                                                   unescape(self._restore(m.group(1), holes)))), out)
        out = LINK.sub(lambda m: hold(self._link(unescape(self._restore(m.group(2), holes)),
                                                 self._emphasis(m.group(1)))), out)
        return self._restore(self._emphasis(out), holes)

    def _emphasis(self, text: str) -> str:
        text = BOLD.sub(lambda m: f"<strong>{m.group(1)}</strong>", text)
        return EMPHASIS.sub(lambda m: f"<em>{m.group(1)}</em>", text)

    @staticmethod
    def _restore(text: str, holes: list[str]) -> str:
        while HOLE.search(text):  # a link's text may hold a code span: restore until none is left
            text = HOLE.sub(lambda m: holes[int(m.group(1))], text)
        return text

    def _image(self, src: str, alt: str) -> str:
        made = self.image(src, alt) if self.image else None
        return made if made is not None else f'<img src="{attribute(src)}" alt="{attribute(alt)}">'

    def _link(self, href: str, text: str) -> str:
        target = self.link(href) if self.link else href
        return text if target is None else f'<a href="{attribute(target)}">{text}</a>'

    def blocks(self, text: str) -> str:
        """A Markdown document as HTML block elements, one a line."""
        lines = text.split("\n")
        out, i = [], 0
        while i < len(lines):
            line = lines[i]
            if not line.strip():
                i += 1
            elif FENCE.match(line.lstrip()):
                end = next((j for j in range(i + 1, len(lines)) if FENCE.match(lines[j].lstrip())), len(lines))
                out.append("<pre><code>" + escape("\n".join(lines[i + 1:end]), quote=False) + "</code></pre>")
                i = end + 1
            elif heading := HEADING.match(line):
                level, words = len(heading.group(1)), self.inline(heading.group(2))
                out.append(f'<h{level} id="{self.heading_id(words)}">{words}</h{level}>')
                i += 1
            elif self._table_starts(lines, i):
                end = i + 2
                while end < len(lines) and lines[end].lstrip().startswith("|"):
                    end += 1
                out.append(self._table(split_row(lines[i]), [split_row(row) for row in lines[i + 2:end]]))
                i = end
            elif BULLET.match(line):
                items, i = self._items(lines, i)
                out.append("<ul>\n" + "\n".join(f"<li>{self.inline(item)}</li>" for item in items) + "\n</ul>")
            else:
                end = i + 1
                while end < len(lines) and lines[end].strip() and not self._starts_block(lines, end):
                    end += 1
                out.append(f"<p>{self.inline(chr(10).join(lines[i:end]))}</p>")
                i = end
        return "\n".join(out) + "\n"

    def _table_starts(self, lines: list[str], i: int) -> bool:
        return lines[i].lstrip().startswith("|") and i + 1 < len(lines) and bool(TABLE_RULE.match(lines[i + 1].strip()))

    def _starts_block(self, lines: list[str], i: int) -> bool:
        line = lines[i]
        return bool(FENCE.match(line.lstrip()) or HEADING.match(line) or BULLET.match(line)
                    or self._table_starts(lines, i))

    def _items(self, lines: list[str], i: int) -> tuple[list[str], int]:
        """A bullet list's items from line i on; a line that starts no block continues the item above."""
        items = []
        while i < len(lines) and lines[i].strip():
            if BULLET.match(lines[i]):
                items.append(BULLET.sub("", lines[i], count=1))
            elif self._starts_block(lines, i):
                break
            else:
                items[-1] += "\n" + lines[i].strip()
            i += 1
        return items, i

    def _table(self, headers: list[str], rows: list[list[str]]) -> str:
        made = self.table(headers, rows) if self.table else None
        if made is not None:
            return made
        head = "".join(f"<th>{self.inline(h)}</th>" for h in headers)
        body = "\n".join("<tr>" + "".join(f"<td>{self.inline(c)}</td>" for c in row) + "</tr>" for row in rows)
        return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def attribute(value: str) -> str:
    """A value for a double-quoted HTML attribute."""
    return escape(value, quote=True)


def to_html(text: str, **hooks) -> str:
    """A Markdown document as HTML, with a converter of its own (image=, link=, table= hooks as MarkdownHtml)."""
    return MarkdownHtml(**hooks).blocks(text)
