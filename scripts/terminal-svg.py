#!/usr/bin/env python3
"""Turns a terminal capture (text with ANSI colour codes, as `tmux capture-pane
-e -p` prints it) into an SVG picture of a terminal window. Standard library only.

    python3 scripts/terminal-svg.py --title TITLE < capture.txt > picture.svg

Understands the SGR codes a capture holds: reset, bold, dim, the 8 + 8
foreground colours, 256-colour and RGB foregrounds; other escapes are dropped.
"""

from __future__ import annotations

import argparse
import html
import re
import sys

# A dark theme; index = ANSI colour number.
PALETTE = [
    "#1d1f21", "#cc6666", "#b5bd68", "#f0c674", "#81a2be", "#b294bb", "#8abeb7", "#c5c8c6",
    "#969896", "#ff7b72", "#d2ff8c", "#ffe38a", "#9ecbff", "#e0b3ff", "#a3f7ef", "#ffffff",
]
FOREGROUND = "#c5c8c6"
BACKGROUND = "#1d1f21"
CHAR_WIDTH = 8.4  # at font-size 14, a typical monospace advance
LINE_HEIGHT = 18
PAD = 14
TITLE_BAR = 30

ESCAPE = re.compile(r"\x1b\[([0-9;]*)([A-Za-z])|\x1b[()][A-Za-z0-9]|\x1b.")


class Pen:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.colour: str | None = None
        self.bold = False
        self.dim = False

    def apply(self, params: str) -> None:
        codes = [int(c) if c else 0 for c in params.split(";")] if params else [0]
        i = 0
        while i < len(codes):
            code = codes[i]
            if code == 0:
                self.reset()
            elif code == 1:
                self.bold = True
            elif code == 2:
                self.dim = True
            elif code == 22:
                self.bold = self.dim = False
            elif 30 <= code <= 37:
                self.colour = PALETTE[code - 30]
            elif 90 <= code <= 97:
                self.colour = PALETTE[code - 90 + 8]
            elif code == 39:
                self.colour = None
            elif code == 38 and i + 2 < len(codes) and codes[i + 1] == 5:
                n = codes[i + 2]
                self.colour = PALETTE[n] if n < 16 else FOREGROUND
                i += 2
            elif code == 38 and i + 4 < len(codes) and codes[i + 1] == 2:
                r, g, b = codes[i + 2 : i + 5]
                self.colour = f"#{r:02x}{g:02x}{b:02x}"
                i += 4
            i += 1

    def style(self) -> str:
        parts = [f'fill="{self.colour or FOREGROUND}"']
        if self.bold:
            parts.append('font-weight="bold"')
        if self.dim:
            parts.append('opacity="0.6"')
        return " ".join(parts)


def spans(line: str, pen: Pen) -> list[tuple[str, str]]:
    """The line's text runs, each with its style."""
    out: list[tuple[str, str]] = []
    at = 0
    for match in ESCAPE.finditer(line):
        if match.start() > at:
            out.append((pen.style(), line[at : match.start()]))
        if match.group(2) == "m":
            pen.apply(match.group(1))
        at = match.end()
    if at < len(line):
        out.append((pen.style(), line[at:]))
    return out


def render(capture: str, title: str) -> str:
    lines = capture.replace("\r", "").rstrip("\n").split("\n")
    while lines and not ESCAPE.sub("", lines[-1]).strip():
        lines.pop()
    columns = max((len(ESCAPE.sub("", line)) for line in lines), default=40)
    # Room for the title too (13 px against the text's 14), clear of the three dots.
    title_columns = len(title) + 16
    width = int(PAD * 2 + max(columns, 40, title_columns) * CHAR_WIDTH)
    height = TITLE_BAR + PAD * 2 + LINE_HEIGHT * len(lines)
    pen = Pen()
    rows = []
    for number, line in enumerate(lines):
        y = TITLE_BAR + PAD + LINE_HEIGHT * (number + 1) - 4
        tspans = "".join(
            f"<tspan {style}>{html.escape(text)}</tspan>" for style, text in spans(line, pen) if text
        )
        if tspans:
            rows.append(f'<text x="{PAD}" y="{y}" xml:space="preserve">{tspans}</text>')
    dots = "".join(
        f'<circle cx="{18 + 20 * i}" cy="{TITLE_BAR // 2}" r="6" fill="{c}"/>'
        for i, c in enumerate(["#ff5f57", "#febc2e", "#28c840"])
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="ui-monospace, SFMono-Regular, Menlo, Consolas, '
        f'\'DejaVu Sans Mono\', monospace" font-size="14">\n'
        f'<rect width="{width}" height="{height}" rx="8" fill="{BACKGROUND}"/>\n'
        f'<rect width="{width}" height="{TITLE_BAR}" rx="8" fill="#2d2f31"/>\n{dots}\n'
        f'<text x="{width // 2}" y="{TITLE_BAR // 2 + 5}" text-anchor="middle" fill="#969896" '
        f'font-size="13">{html.escape(title)}</text>\n' + "\n".join(rows) + "\n</svg>\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--title", default="terminal")
    args = parser.parse_args()
    sys.stdout.write(render(sys.stdin.read(), args.title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
