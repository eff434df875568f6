#!/usr/bin/env python3
"""picturecheck.py -- check the pictures tmdb's heatmap and plot write.

    picturecheck.py check FILE.png FILE.svg [--text S]... [--title S]...
                          [--fill RRGGBB:N]... [--min WxH]
    picturecheck.py same NEW.png OLD.png NEW.svg OLD.svg

`check`: the PNG is decoded with zlib and struct only (cairo's 8-bit RGB or
RGBA, all five filters); its size must be at least --min and the same as
the SVG's; the SVG must hold each --text as a <text> element's text and
each --title as a <title> (a shortened label's full name); --fill
RRGGBB:N: at least N SVG shapes filled with that colour (magenta ff00ff
marks NaN cells) and some PNG pixels of that colour.
`same`: a regenerated picture against the committed one (doc/img): the
SVGs hold the same texts and the same cell colours in the same order, and
the PNGs have the same size and differ in under 10% of their pixels (fonts
differ across machines; the layout does not).
"""
from __future__ import annotations

import math
import re
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

NS = "{http://www.w3.org/2000/svg}"


def png(path: str) -> tuple[int, int, list[bytes], int]:
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    pos, idat = 8, b""
    w = h = bpp = 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert zlib.crc32(kind + body) == crc, f"{path}: bad CRC in {kind!r}"
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), f"{path}: colour type {ctype}"
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, rows, prev = zlib.decompress(idat), [], bytearray(w * bpp)
    stride = w * bpp + 1
    for y in range(h):
        f, line = raw[y * stride], bytearray(raw[y * stride + 1:(y + 1) * stride])
        for i in range(len(line)):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, rows, bpp


def pixels(rows: list[bytes], bpp: int):
    for r in rows:
        for i in range(0, len(r), bpp):
            yield r[i:i + 3]


def svg(path: str) -> tuple[int, int, list[str], list[str], list[str]]:
    root = ET.parse(path).getroot()
    texts, titles, fills = [], [], []
    for el in root.iter():
        if el.tag == NS + "text":
            texts.append("".join(t for t in [el.text] if t) +
                         "".join((c.tail or "") for c in el))
        elif el.tag == NS + "title":
            titles.append(el.text or "")
        elif el.tag in (NS + "rect", NS + "polygon") and el.get("fill", "").startswith("#"):
            fills.append(el.get("fill")[1:].lower())
    return int(root.get("width")), int(root.get("height")), texts, titles, fills


def check(args: list[str]) -> int:
    pngf, svgf, rest = args[0], args[1], args[2:]
    w, h, rows, bpp = png(pngf)
    sw, sh, texts, titles, fills = svg(svgf)
    assert (w, h) == (sw, sh), f"PNG is {w}x{h}, SVG is {sw}x{sh}"
    it = iter(rest)
    for opt in it:
        val = next(it)
        if opt == "--text":
            assert val in texts, f"no <text> {val!r} in {svgf}: {texts}"
        elif opt == "--title":
            assert val in titles, f"no <title> {val!r} in {svgf}: {titles}"
        elif opt == "--min":
            mw, mh = (int(v) for v in val.split("x"))
            assert w >= mw and h >= mh, f"{w}x{h} is smaller than {val}"
        elif opt == "--fill":
            colour, n = val.split(":")
            got = fills.count(colour.lower())
            assert got >= int(n), f"{got} shapes filled #{colour} in {svgf}, want {n}"
            rgb = bytes.fromhex(colour)
            assert any(p == rgb for p in pixels(rows, bpp)), f"no #{colour} pixel in {pngf}"
        else:
            raise SystemExit(f"unknown option {opt}")
    print(f"pictures OK: {w}x{h}, {len(texts)} texts")
    return 0


_NUM = re.compile(r"0x[0-9a-fA-F]+|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _num(x: str) -> float:
    return float(int(x, 16)) if x.startswith("0x") else float(x)


def close_text(a: str, b: str, rel: float = 1e-3) -> bool:
    """Whether a and b say the same up to their numbers' last digits: what a
    model computes differs in its last bits between CPUs (torch's kernels
    for each), and a run that diverges carries that to the fourth digit.
    The words between the numbers are the same (runs of spaces aside: a
    shorter number moves a column), each number within rel of the other.
    So a count, a step or an index under 1/rel that differs by one is
    still a difference; a larger integer may be a value (a float's bits in
    hex, an integral l2), so it gets the same tolerance."""
    if a == b:
        return True
    na, nb = _NUM.findall(a), _NUM.findall(b)
    words = [" ".join(w.split()) for w in _NUM.split(a)]
    if len(na) != len(nb) or words != [" ".join(w.split()) for w in _NUM.split(b)]:
        return False
    return all(math.isclose(_num(x), _num(y), rel_tol=rel) for x, y in zip(na, nb))


def same(args: list[str]) -> int:
    new_png, old_png, new_svg, old_svg = args
    n, o = svg(new_svg), svg(old_svg)
    assert n[:2] == o[:2], f"SVG size {n[:2]} != committed {o[:2]}"
    assert len(n[2]) == len(o[2]) and all(close_text(x, y) for x, y in zip(n[2], o[2])), \
        f"SVG texts differ:\n{n[2]}\n{o[2]}"
    assert n[4] == o[4], "SVG cell colours differ"
    nw, nh, nr, nb = png(new_png)
    ow, oh, orows, ob = png(old_png)
    assert (nw, nh) == (ow, oh), f"PNG size {nw}x{nh} != committed {ow}x{oh}"
    diff = sum(1 for a, b in zip(pixels(nr, nb), pixels(orows, ob))
               if max(abs(x - y) for x, y in zip(a, b)) > 48)
    assert diff < 0.10 * nw * nh, f"{diff} of {nw * nh} pixels differ"
    print(f"pictures same: {nw}x{nh}, {diff} pixels differ")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(check(sys.argv[2:]) if sys.argv[1] == "check" else same(sys.argv[2:]))
    except AssertionError as e:
        print(f"picturecheck: {e}")
        sys.exit(1)
