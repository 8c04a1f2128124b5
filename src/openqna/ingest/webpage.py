"""HTML pages: the main content only, with headings, lists and tables kept.

Parsed with selectolax's Lexbor engine: a full HTML5 parser (so broken markup is repaired
the way browsers repair it), MIT licensed, no dependencies, and 0.3 ms for a typical
docs page against 0.7 ms for lxml, 15-20 ms for BeautifulSoup and 23 ms for
trafilatura (measured on 40 rustc book pages).  We use explicit rules instead of
trafilatura's statistical extraction because support articles and FAQ pages are short,
and heuristics tuned for news articles drop short answers as "boilerplate".

The rules: content is ``<main>`` (or ``role=main``, or the only ``<article>``), else
``<body>``.  Inside it we drop navigation and chrome (nav, aside, footers, the site
header but not an article's own header, ARIA landmarks for the same), non-content
elements (script, style, form controls, embedded media, hidden elements) and cookie or
consent banners, breadcrumbs and sidebars recognised by their id or class.

Inline markup is kept as Markdown, as answers are Markdown: links and images with an address a reader can
follow, bold, italics and code.  Headings, bold questions and table cells are read as plain text.

FAQ widgets are headings: a ``<details>`` block's ``<summary>``, a definition list's
``<dt>`` and a paragraph that is one bold question (``<p><strong>Can I ...?</strong></p>``)
become a heading one level below the page's last real heading, and what follows (the rest
of the block, the ``<dd>``, the next paragraphs) its text, so each pair becomes a QnA as a
heading FAQ does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from urllib.parse import urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser, LexborNode

from openqna.ingest.markdown_tables import markdown_table
from openqna.ingest.parsed import Block, DocumentError, ParsedDocument
from openqna.ingest.textcodec import bom_encoding, decode_text
from openqna.ingest.typography import MAX_HEADING_CHARS

_NON_CONTENT = (
    "script, style, noscript, template, iframe, object, embed, svg, canvas, video, audio, "
    "button, input, select, textarea, dialog, nav, aside, footer, [hidden], [aria-hidden=true], "
    "[role=navigation], [role=banner], [role=contentinfo], [role=complementary], [role=search]"
)
# Matched against each id and class token.  Prefix-only for words that also name layout
# wrappers ("has-sidebar" wraps the whole page; "sidebar-left" is the sidebar).
_CHROME = re.compile(r"cookie|consent|gdpr|onetrust|^(breadcrumbs?|sidebar|skip-?link)\b", re.IGNORECASE)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_XML_ENCODING = re.compile(rb"""\A\s*<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9._:-]+)""")  # an .xhtml file's
_SPACE = re.compile(r"\s+")
_BLOCK_TAGS = frozenset({
    "address", "article", "blockquote", "body", "dd", "details", "div", "dl", "dt", "fieldset",
    "figcaption", "figure", "form", "header", "hgroup", "li", "main", "ol", "p", "pre", "section",
    "summary", "ul",
})  # fmt: skip
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
# Inline elements kept as Markdown, as answers are Markdown: links and images (below), emphasis and code
_INLINE_MARKUP = {"b": "**", "strong": "**", "i": "*", "em": "*", "code": "`", "kbd": "`", "samp": "`", "tt": "`"}
_LINK_SCHEMES = frozenset({"http", "https", "mailto", "tel", "ftp"})
_QUESTION_MARKS = ("?", "？")
_MAX_COLSPAN = 50
# Lexbor, like the HTML standard's tree builder, looks through the open elements at every start tag, so
# a page of N nested elements costs N² (200,000 nested <div>s, 2 MB, took minutes).  Browsers stop
# nesting at 512 levels; real pages stay under 100.
MAX_NESTING = 5_000
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)[^>]*?(/?)>")
# Elements that do not nest in the tree even when their end tag is left out (void ones, and ones whose
# next sibling closes them), so they are not counted.
_FLAT = frozenset({
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr",
    "p", "li", "dt", "dd", "tr", "td", "th", "option", "optgroup", "rb", "rt", "rp", "tbody", "thead", "tfoot",
    "colgroup", "caption", "param", "html", "head", "body",
})  # fmt: skip  # colspan="100000" must not blow up a table


def parse_html(name: str, data: bytes) -> ParsedDocument:
    declared = None
    if not bom_encoding(data):
        found = _META_CHARSET.search(data[:4096]) or _XML_ENCODING.match(data[:1024])
        declared = found.group(1).decode("ascii") if found else None
    text = decode_text(data, name, declared)
    _check_nesting(name, text)
    tree = LexborHTMLParser(text)
    title_node = tree.css_first("title")
    root = _content_root(tree)
    blocks: list[Block] = []
    if root is not None:
        _strip_chrome(root)
        base = tree.css_first("base[href]")
        walker = _Walker(blocks, _absolute_url(base.attributes.get("href"), None) if base is not None else None)
        walker.walk(root)
        walker.flush()  # text after the last block element (or a page of text without any)
    title = _SPACE.sub(" ", title_node.text()).strip() if title_node is not None else ""
    if not title:
        title = next((b.text for b in blocks if b.kind == "heading"), "")
    return ParsedDocument(source=name, title=title or None, blocks=blocks)


def _check_nesting(name: str, text: str) -> None:
    """Refuse a page whose elements nest deeper than ``MAX_NESTING`` (counted from its tags) before Lexbor
    spends quadratic time building it."""
    depth = 0
    for found in _TAG.finditer(text):
        if found.group(2).lower() in _FLAT or found.group(3):
            continue
        depth += -1 if found.group(1) else 1
        if depth > MAX_NESTING:
            raise DocumentError(name, f"nests its HTML elements more than {MAX_NESTING:,} deep; this is not a page "
                                      "anyone can read (browsers stop at 512)")
        depth = max(depth, 0)


def _content_root(tree: LexborHTMLParser) -> LexborNode | None:
    for selector in ("main", "[role=main]"):
        node = tree.css_first(selector)
        if node is not None:
            return node
    articles = tree.css("article")
    return articles[0] if len(articles) == 1 else tree.body


def _strip_chrome(root: LexborNode) -> None:
    doomed = root.css(_NON_CONTENT)
    # An <article>'s own header holds its title; only the site header is chrome.
    doomed += [node for node in root.css("header") if not any(a.tag in ("article", "main") for a in _ancestors(node))]
    doomed += [node for node in root.css("[id], [class]") if _is_chrome(node)]
    # Removing a node frees its subtree: remove each node once, and never one whose ancestor goes too.
    # So pick the outermost nodes first, then remove them.
    unique = {node.mem_id: node for node in doomed}
    outermost = [node for node in unique.values() if not any(a.mem_id in unique for a in _ancestors(node))]
    for node in outermost:
        node.decompose()


def _is_chrome(node: LexborNode) -> bool:
    names = f"{node.attributes.get('id') or ''} {node.attributes.get('class') or ''}".split()
    return any(_CHROME.search(name) for name in names)


def _is_bold_question(paragraph: LexborNode) -> bool:
    """A paragraph holding nothing but one ``<b>`` or ``<strong>`` whose text asks a question."""
    text = _SPACE.sub(" ", paragraph.text()).strip()
    if not text.endswith(_QUESTION_MARKS) or len(text) > MAX_HEADING_CHARS:
        return False
    bold = None
    child = paragraph.child
    while child is not None:
        if child.is_element_node and child.tag in ("b", "strong") and bold is None:
            bold = child
        elif child.is_element_node or (child.is_text_node and (child.text_content or "").strip()):
            return False
        child = child.next
    return bold is not None


def _children(node: LexborNode) -> list[LexborNode]:
    children = []
    child = node.child
    while child is not None:
        children.append(child)
        child = child.next
    return children


def _absolute_url(value: str | None, base: str | None) -> str | None:
    """``value`` as an absolute link a reader can follow from an answer, or None: a relative link without a
    base, a page anchor or a ``javascript:``/``data:`` URL would be broken or harmful outside the page."""
    value = (value or "").strip()
    if not value or value.startswith("#"):
        return None
    url = urljoin(base, value) if base else value
    if urlsplit(url).scheme.lower() not in _LINK_SCHEMES:
        return None
    # a Markdown link ends at the first space or unbalanced ")"
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")


def _nothing() -> None:
    pass


def _ancestors(node: LexborNode) -> Iterator[LexborNode]:
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


class _Walker:
    """Turns the element tree into blocks: inline text accumulates until a block element ends it."""

    def __init__(self, blocks: list[Block], base: str | None):
        self.blocks = blocks
        self.base = base  # what relative links are resolved against: the page's <base href>, when absolute
        self.open_markup = {markup: 0 for markup in ("[", "**", "*", "`")}  # inline markup open around the text now
        self.buffer: list[str] = []
        self.item_prefix: str | None = None  # "  - " while inside a list item
        self.lists: list[list] = []  # per open list: [ordered?, next number]
        self.level = 0  # the last h1-h6's level
        self.nested = 0  # open <details> and <dl> elements, whose questions are headings below it

    def walk(self, root: LexborNode) -> None:
        """Visits ``root``'s descendants in document order with a stack of its own, not Python's: a page may
        nest elements thousands deep (past 500 the recursion this replaced failed with RecursionError)."""
        stack: list[LexborNode | Callable[[], None]] = _children(root)[::-1]
        while stack:
            item = stack.pop()
            if not isinstance(item, LexborNode):
                item()
                continue
            done = self.visit(item)
            if done is not None:
                stack.append(done)
                stack.extend(_children(item)[::-1])

    def visit(self, node: LexborNode) -> Callable[[], None] | None:
        """Handles ``node`` itself; returns what to do once its children are visited, or None to skip them."""
        tag = node.tag
        if node.is_text_node:  # source line breaks are spaces; only <br> breaks a line
            self.buffer.append(_SPACE.sub(" ", node.text_content or ""))
        elif tag in _HEADINGS:
            self.flush()
            text = _SPACE.sub(" ", node.text()).strip()
            if text:
                self.blocks.append(Block("heading", text, level=_HEADINGS[tag]))
                self.level = _HEADINGS[tag]
        elif tag in ("details", "dl"):
            self.flush()
            self.nested += 1
            return self._end_nested
        elif tag == "dt" or tag == "summary" and node.parent is not None and node.parent.tag == "details":
            self.flush()
            text = _SPACE.sub(" ", node.text()).strip()
            if text:
                self.blocks.append(Block("heading", text, level=self.level + self.nested))
        elif tag == "table":
            self.flush()
            self.table(node)
        elif tag in ("ul", "ol"):
            self.flush()
            start = node.attributes.get("start") or "1"
            self.lists.append([tag == "ol", int(start) if start.isdigit() else 1])
            return self._end_list
        elif tag == "li":
            self.flush()
            ordered, number = self.lists[-1] if self.lists else (False, 1)
            if self.lists:
                self.lists[-1][1] += 1
            indent = "  " * max(len(self.lists) - 1, 0)
            self.item_prefix = f"{indent}{number}. " if ordered else f"{indent}- "
            return self.flush
        elif tag == "p" and _is_bold_question(node):
            self.flush()
            self.blocks.append(Block("heading", _SPACE.sub(" ", node.text()).strip(), level=self.level + self.nested + 1))
        elif tag == "pre":
            self.flush()
            code = (node.text(deep=True) or "").strip("\n")
            if code.strip():
                self.blocks.append(Block("paragraph", f"```\n{code}\n```"))
        elif tag == "br":
            self.buffer.append("\n")
        elif tag in _BLOCK_TAGS:
            self.flush()
            return self.flush
        elif tag == "img":
            alt = _SPACE.sub(" ", node.attributes.get("alt") or "").strip()
            src = _absolute_url(node.attributes.get("src"), self.base)
            self.buffer.append(f"![{alt.replace('[', '(').replace(']', ')')}]({src})" if src and not self.open_markup["`"] else alt)
        elif node.is_element_node:  # inline element: its text joins the current paragraph
            markup = self._inline_markup(node)
            if markup is None:
                return _nothing
            self.open_markup[markup[0]] += 1
            return lambda start=len(self.buffer): self._close_inline(start, *markup)
        return None

    def _inline_markup(self, node: LexborNode) -> tuple[str, str] | None:
        """The Markdown an inline element's text goes between (a link, emphasis, code), or None for plain text.
        Nothing is marked inside code (Markdown shows it literally), nor twice (a link in a link, bold in bold)."""
        tag = node.tag
        if self.open_markup["`"]:
            return None
        if tag == "a":
            href = _absolute_url(node.attributes.get("href"), self.base)
            return ("[", f"]({href})") if href and not self.open_markup["["] else None
        if tag in _INLINE_MARKUP and not self.open_markup[_INLINE_MARKUP[tag]]:
            return _INLINE_MARKUP[tag], _INLINE_MARKUP[tag]
        return None

    def _close_inline(self, start: int, opening: str, closing: str) -> None:
        """Puts the text written since ``start`` between ``opening`` and ``closing``, its outer spaces outside the
        markup (``** Save **`` is not bold in Markdown); a blank one, or emphasis around a line break (which
        Markdown does not allow), stays plain."""
        self.open_markup[opening] -= 1
        inner = "".join(self.buffer[start:])
        text = _SPACE.sub(" ", inner) if opening == "`" else inner
        stripped = text.strip(" ")
        if not stripped.strip() or ("\n" in stripped and opening != "["):
            return
        lead, trail = text[: len(text) - len(text.lstrip(" "))], text[len(text.rstrip(" ")) :]
        self.buffer[start:] = [f"{lead}{opening}{stripped}{closing}{trail}"]

    def _end_nested(self) -> None:
        self.flush()
        self.nested -= 1

    def _end_list(self) -> None:
        self.flush()
        self.lists.pop()

    def flush(self) -> None:
        lines = (_SPACE.sub(" ", line).strip() for line in "".join(self.buffer).split("\n"))
        text = "\n".join(line for line in lines if line)
        self.buffer = []
        if not text:
            return
        if self.item_prefix is not None:
            self.blocks.append(Block("list_item", self.item_prefix + text))
            self.item_prefix = None  # a nested list's text after this is its own item
        else:
            self.blocks.append(Block("paragraph", text))

    def table(self, table: LexborNode) -> None:
        rows: list[list[str]] = []
        header = False
        for row in table.css("tr"):
            if next(a for a in _ancestors(row) if a.tag == "table") != table:
                continue  # a nested table's row; its text stays in the outer cell
            cells = [cell for cell in row.css("th, td") if cell.parent == row]
            if not rows:
                header = bool(cells) and (row.parent.tag == "thead" or all(cell.tag == "th" for cell in cells))
            texts: list[str] = []
            for cell in cells:
                texts.append(cell.text(separator=" "))
                span = cell.attributes.get("colspan") or "1"
                texts.extend([""] * (min(int(span), _MAX_COLSPAN) - 1 if span.isdigit() and int(span) > 1 else 0))
            rows.append(texts)
        rendered = markdown_table(rows, header=header)
        if rendered:
            self.blocks.append(Block("table", rendered))
