"""Prose sources (handbook, debconf, UDHR) ship sentences, not paragraphs: one splitter for every script, and an
HTML reader that marks sentences holding code so they can be dropped whole."""

from __future__ import annotations

import re

from .cleaning import clean

# After . ! ? … and the full stops of other scripts (Arabic ؟, Armenian ։, Devanagari ।, Urdu ۔, Ethiopic ።,
# Myanmar ။, Khmer ។) followed by a space; after the ideographic 。！？ even without one.
_SENTENCE_END = re.compile(r"(?<=[.!?;؟։…।۔።။។])\s+(?=\S)|(?<=[。！？])\s*(?=[^\s」』）”’。！？])")


def sentences(paragraph: str, label: str) -> list[str]:
    """Split a paragraph into sentences (';' ends one only in Greek, where it is the question mark)."""
    parts = [p for p in _SENTENCE_END.split(clean(paragraph)) if p]
    if not label.endswith("-Grek"):
        glued: list[str] = []
        for part in parts:
            if glued and glued[-1].endswith(";"):
                glued[-1] += " " + part
            else:
                glued.append(part)
        parts = glued
    return parts


class ParaText:
    """Text of the paragraph elements of an HTML page; inline code-like elements poison their sentence."""

    def __init__(self, para: tuple[str, str], poison: set[str], skip: set[str]) -> None:
        from html.parser import HTMLParser

        self.paragraphs: list[str] = []
        outer = self

        class Parser(HTMLParser):
            def __init__(self) -> None:
                super().__init__(convert_charrefs=True)
                self.stack: list[tuple[str, bool, bool]] = []  # (tag, opens a paragraph, poisons/skips)
                self.buffer: list[str] | None = None

            def handle_starttag(self, tag, attrs):
                if tag in ("br", "img", "meta", "link", "hr", "input"):
                    return
                classes = set((dict(attrs).get("class") or "").split())
                opens = self.buffer is None and tag == para[0] and (not para[1] or para[1] in classes)
                if opens:
                    self.buffer = []
                marks = bool(classes & poison) or tag in ("code", "pre", "kbd", "samp", "tt")
                if self.buffer is not None and marks and not opens:
                    self.buffer.append("\0")
                self.stack.append((tag, opens, marks or bool(classes & skip) or tag in ("sup",)))

            def handle_endtag(self, tag):
                while self.stack:
                    name, opens, _ = self.stack.pop()
                    if opens:
                        outer.paragraphs.append("".join(self.buffer))
                        self.buffer = None
                    if name == tag:
                        break

            def handle_data(self, data):
                if self.buffer is not None and not any(hidden for _, _, hidden in self.stack):
                    self.buffer.append(data)

        self.parser = Parser()

    def feed(self, html: str) -> list[str]:
        self.parser.feed(html)
        self.parser.close()
        return self.paragraphs
