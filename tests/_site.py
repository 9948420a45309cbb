"""Reading the built reading site in tests (tests/test_site.py, tests/test_site_course.py)."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from tools import build_site  # noqa: E402, F401 - tools/build_site.py, for the tests that import it from here


class _Page(HTMLParser):
    """Tags with their attributes, element ids, and the text outside <script>/<style>."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.ids: set[str] = set()
        self.text: list[str] = []
        self._skip = 0
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)

    def all(self, tag: str) -> list[dict]:
        return [a for t, a in self.tags if t == tag]


def read_page(path: Path) -> _Page:
    return _Page(path.read_text())


def article_html(path: Path) -> str:
    """The HTML of the page's main content (the lesson), without the theme's navigation."""
    text = path.read_text()
    start = text.index('<article class="bd-article">')
    return text[start : text.index("</article>", start)]
