"""Drive a real headless Chromium: dump the DOM after the page's script ran, take screenshots.

Without a Chromium on PATH the browser tests are skipped, saying how to
install one, so ``uv run pytest`` passes on a fresh machine. CI installs
Chromium and sets ``DISTEA_REQUIRE_BROWSER=1``: there a missing browser fails
the tests instead of skipping them.
Console output is captured with ``--enable-logging=stderr --v=0``: every
``console.*`` message and uncaught exception appears there as a ``CONSOLE``
line; the report's script logs nothing, so any such line is an error.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
REQUIRE_VARIABLE = "DISTEA_REQUIRE_BROWSER"
"""Set to 1 (CI does) to fail, not skip, the browser tests where Chromium is missing."""
CONSOLE = re.compile(r":CONSOLE[:(\]].*|Uncaught.*")


def chromium() -> str:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    reason = ("the HTML report tests need a headless Chromium: `apt-get install -y chromium` "
              "(Debian) or put chromium on PATH")
    if os.environ.get(REQUIRE_VARIABLE) == "1":
        pytest.fail(f"{reason} ({REQUIRE_VARIABLE}=1 makes them required)")
    pytest.skip(reason)


def _run(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    cmd = [chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
           "--no-first-run", "--disable-extensions", "--disable-background-networking",
           "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}"
    return proc


def console_messages(stderr: str) -> list[str]:
    return [m.group(0) for m in CONSOLE.finditer(stderr)]


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: str = ""

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


@dataclass
class Dom:
    elements: list[Element] = field(default_factory=list)
    console: list[str] = field(default_factory=list)

    def select(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Element]:
        out = []
        for e in self.elements:
            if tag is not None and e.tag != tag:
                continue
            if cls is not None and not set(cls.split()) <= e.classes:
                continue
            if any(e.attrs.get(k.replace("_", "-")) != v for k, v in attrs.items()):
                continue
            out.append(e)
        return out

    def by_id(self, ident: str) -> Element:
        found = [e for e in self.elements if e.attrs.get("id") == ident]
        assert found, f"no element #{ident}"
        return found[0]


class _Collector(HTMLParser):
    VOID = frozenset({"meta", "link", "input", "br", "img", "hr", "source", "wbr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.dom = Dom()
        self.stack: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = Element(tag, {k: v or "" for k, v in attrs})
        self.dom.elements.append(el)
        if tag not in self.VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.dom.elements.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        for el in self.stack:  # text content, like Node.textContent
            el.text += data


def dump_dom(page: Path, fragment: str, profile: Path, *, size: str = "1500,1000") -> Dom:
    """The DOM after the page's script ran, at ``page#fragment``, in a window of ``size``."""
    url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    proc = _run([f"--window-size={size}", "--dump-dom", url], profile)
    parser = _Collector()
    parser.feed(proc.stdout)
    parser.dom.console = console_messages(proc.stderr)
    return parser.dom


def screenshot(page: Path, png: Path, profile: Path, *, size: str = "1500,1100",
               fragment: str = "") -> list[str]:
    """Save a screenshot of ``page``; returns the console messages."""
    url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    proc = _run([f"--window-size={size}", f"--screenshot={png}", url], profile)
    assert png.exists() and png.stat().st_size > 10_000, "screenshot missing or blank"
    return console_messages(proc.stderr)
