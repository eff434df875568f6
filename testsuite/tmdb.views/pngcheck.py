#!/usr/bin/env python3
"""pngcheck.py -- decode a PNG that tmdb's heatmap wrote and compare it,
cell by cell, with the plain-text render of the same picture.

    pngcheck.py FILE.png RENDER.txt tensor|steps SCALE

The PNG is decoded here with zlib and struct only (no imaging library):
8-bit palette, filter 0 rows.  Each text cell names the palette indices
its pixels may have: a ramp character the value levels of its ninth of the
scale, '!' NaN, '^' +Inf, 'v' -Inf, '/' the two gap stripes, ' ' empty.
"""
from __future__ import annotations

import struct
import sys
import zlib

RAMP = ".:-=+*#%@"
LEVELS = 250
SPECIAL = {"!": {250}, "^": {251}, "v": {252}, "/": {253, 254}, " ": {255}}
COLOURS = {250: (255, 0, 255), 251: (255, 48, 48), 252: (0, 224, 255),
           253: (160, 160, 160), 254: (72, 72, 72)}


def decode(path: str) -> tuple[int, int, list[bytes], bytes]:
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, plte = 8, b"", b""
    width = height = 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in {kind!r}"
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert (depth, ctype) == (8, 3), "expected an 8-bit palette image"
        elif kind == b"PLTE":
            plte = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    rows = []
    for y in range(height):
        line = raw[y * (width + 1):(y + 1) * (width + 1)]
        assert line[0] == 0, "unexpected filter"
        rows.append(line[1:])
    return width, height, rows, plte


def cells(text: str, mode: str) -> list[str]:
    out: list[str] = []
    lines = text.split("\n")
    if mode == "tensor":
        on = False
        for line in lines:
            if line.startswith("Showing "):
                on = True
            elif line.startswith("Legend:"):
                on = False
            elif on:
                out.append(line[2:])
    else:
        for line in lines:
            if line.endswith("|") and " |" in line:
                out.append(line[line.index(" |") + 2:-1])
    return out


def allowed(ch: str) -> set[int]:
    if ch in SPECIAL:
        return SPECIAL[ch]
    k = RAMP.index(ch)
    return {lv for lv in range(LEVELS) if lv * len(RAMP) // LEVELS == k}


def main() -> int:
    png, txt, mode, scale = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    width, height, rows, plte = decode(png)
    grid = cells(open(txt, encoding="utf-8").read(), mode)
    assert grid, "no cells in the text render"
    assert width == len(grid[0]) * scale and height == len(grid) * scale, \
        f"PNG is {width}x{height}, text is {len(grid[0])}x{len(grid)} cells"
    for idx, rgb in COLOURS.items():
        assert tuple(plte[3 * idx:3 * idx + 3]) == rgb, f"palette {idx}"
    kinds: dict[str, int] = {}
    for cy, line in enumerate(grid):
        for cx, ch in enumerate(line):
            ok = allowed(ch)
            for y in range(cy * scale, (cy + 1) * scale):
                for x in range(cx * scale, (cx + 1) * scale):
                    px = rows[y][x]
                    if px not in ok:
                        print(f"cell ({cx},{cy}) '{ch}': pixel ({x},{y}) is {px}")
                        return 1
            kinds[ch] = kinds.get(ch, 0) + 1
    special = ", ".join(f"{k!r} {v}" for k, v in sorted(kinds.items()) if k in SPECIAL)
    print(f"PNG OK: {width}x{height} pixels, {len(grid[0])}x{len(grid)} cells match"
          f" ({special or 'no special cells'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
