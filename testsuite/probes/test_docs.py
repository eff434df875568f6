"""The sessions shown in doc/manual.md and README, run as printed.

A manual that drifts from the program fails the build.  Each session is
run against this build, in a sandbox directory that looks like the
repository's top (examples/, with the build's generated traces beside the
bundled scripts) and has the documented commands on its PATH, and its
output is compared line by line with the one printed in the document,
after masking what must vary from run to run (masks below).  Numbers
match to their fourth digit (picturecheck.close_text): a model's arithmetic
differs in its last bits between CPUs, and the manual's diverging run
carries that far.

What counts as a session, in a fenced block of the manual (or a block of
README indented by four spaces):

  $ COMMAND            a shell command (a trailing backslash continues it),
  output...            followed by what it prints;
  $ tmdb ...           a tmdb that reads commands: each `(tmdb) CMD` line
  (tmdb) CMD           is one typed command, followed by what it prints;
  output...            a later block that starts with `(tmdb)` goes on
                       with the same tmdb;
  $ cat FILE           FILE's content is what follows: it is written, not
  content...           checked, for the commands after it.

A line `...` in the printed output stands for any number of lines.  Blocks
that start otherwise are fragments (an excerpt of a longer output) and are
not run.  Directives, on a line of their own before a block, as HTML
comments that a renderer does not show:

  <!-- doctest: sh COMMAND -->   run COMMAND first (a set-up the prose names)
  <!-- doctest: skip REASON -->  do not run the next block (say why)
  <!-- doctest: mask REGEX -->   what REGEX matches varies from run to run in
                                 this block's outputs (e.g. a seq on a job's
                                 time axis, merged by the ranks' clocks)

Paths under /tmp in a command are the sandbox's own, and the sandbox's
paths in the output read back as /tmp again.

After a change of output on purpose, TM_DOCTEST_UPDATE=1 (through
run-pytest.sh, as make check runs it) writes what each session printed
into the documents, except the outputs that hold `...`; read the diff.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import TMDB, needs_tmdb

TOP = Path(__file__).resolve().parents[2]
DOCS = [TOP / "doc" / "manual.md", TOP / "README"]
# slow: the documents are checked once, by the normal build's run; the
# sanitizer run and distcheck (TM_QUICK) leave them out
pytestmark = [needs_tmdb, pytest.mark.slow]

_DIRECTIVE = re.compile(r"^<!-- doctest: (sh|skip|mask) ?(.*?) ?-->$")


@dataclass
class Unit:
    """One shell command, or one tmdb session with its typed commands."""
    doc: str
    line: int
    cmd: str
    out: list[str]
    steps: list[tuple[str, list[str], int]] = field(default_factory=list)
    tmdb: bool = False
    setup: list[str] = field(default_factory=list)
    masks: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.doc}:{self.line}"


def _blocks(path: Path):
    """(first line number, lines, directives) of each code block."""
    text = path.read_text().splitlines()
    fenced = path.suffix == ".md"
    pending: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        ln = text[i]
        m = _DIRECTIVE.match(ln.strip())
        if m:
            pending.append((m.group(1), m.group(2)))
            i += 1
            continue
        if fenced and ln.startswith("```"):
            j = i + 1
            while j < len(text) and not text[j].startswith("```"):
                j += 1
            yield i + 2, text[i + 1:j], pending
            pending = []
            i = j + 1
            continue
        if not fenced and ln.startswith("    $ ") and (i == 0 or not text[i - 1].strip()):
            j = i
            while j < len(text) and (text[j].startswith("    ") or
                                     (not text[j].strip() and j + 1 < len(text) and
                                      text[j + 1].startswith("    "))):
                j += 1
            yield i + 1, [t[4:] for t in text[i:j]], pending
            pending = []
            i = j
            continue
        if ln.strip():
            pending = [] if not ln.startswith("<!--") else pending
        i += 1


def _units(path: Path) -> list[Unit | tuple[str, str]]:
    """The document's units in order; a skipped block is ("skip", reason)."""
    units: list = []
    last_tmdb: Unit | None = None
    for first, lines, directives in _blocks(path):
        setup = [arg for kind, arg in directives if kind == "sh"]
        masks = [arg for kind, arg in directives if kind == "mask"]
        skip = [arg for kind, arg in directives if kind == "skip"]
        if skip:
            units.append(("skip", f"{path.name}:{first}: {skip[0]}"))
            continue
        if not lines or not (lines[0].startswith("$ ") or lines[0].startswith("(tmdb)")):
            continue                                    # a fragment
        i, n = 0, len(lines)
        if lines[0].startswith("(tmdb)"):
            if last_tmdb is None:
                raise AssertionError(f"{path.name}:{first}: (tmdb) with no tmdb before it")
            i = _take_steps(lines, i, first, last_tmdb)
            last_tmdb.masks += masks
        while i < n:
            if not lines[i].startswith("$ "):
                raise AssertionError(f"{path.name}:{first + i}: expected '$ ' or '(tmdb)'")
            line_no = first + i
            cmd = lines[i][2:]
            i += 1
            while cmd.endswith("\\") and i < n:
                cmd = cmd + "\n" + lines[i]
                i += 1
            out = []
            while i < n and not lines[i].startswith(("$ ", "(tmdb)")):
                out.append(lines[i])
                i += 1
            u = Unit(path.name, line_no, cmd, out, setup=setup, masks=masks)
            setup = []
            units.append(u)
            if i < n and lines[i].startswith("(tmdb)"):
                u.tmdb = True
                last_tmdb = u
                i = _take_steps(lines, i, first, u)
    return units


def _take_steps(lines, i, first, u: Unit) -> int:
    n = len(lines)
    while i < n and lines[i].startswith("(tmdb)"):
        cmd, line_no = lines[i][7:], first + i
        i += 1
        out = []
        while i < n and not lines[i].startswith(("$ ", "(tmdb)")):
            out.append(lines[i])
            i += 1
        u.steps.append((cmd, out, line_no))
    return i


# ------------------------------------------------------------------ masks

_MASKS = [
    # where Python and the repository live
    (re.compile(r"(?<![\w.-])(?:/[^\s:'\"]*?/|\.\.\./)?(site-packages|examples|probes/pytorch)/"),
     r"\1/"),
    (re.compile(r"Starting program: \S*/(python3?|torchrun)\b"), r"Starting program: \1"),
    (re.compile(r"Starting program: python3\b"), "Starting program: python"),
    # the probe's socket directory and names
    (re.compile(r"\S*/tensormorph(?:-\d+)?/tmdb-\d+-\d+"), "SOCKDIR/tmdb-PID-N"),
    # pids, hosts, sizes and times
    (re.compile(r"\b(process|Process|processes) \d+((?:, \d+)*)"), r"\1 PID"),
    (re.compile(r"\bhost \S+"), "host HOST"),
    # a rank waiting in a collective for a paused one cannot pause itself
    (re.compile(r"\((paused|running)\) *"), "(STATE) "),
    (re.compile(r"\b\d+ bytes\b"), "N bytes"),
    (re.compile(r"\bin \d+ chunks?\b"), "in N chunks"),
    (re.compile(r"\bbyte \d+\b"), "byte N"),
    (re.compile(r"\b\d+(\.\d+)?(e[+-]?\d+)? ?(ns|us|ms|s)\b"), "TIME"),
]


def _mask(line: str, extra: list[str] = ()) -> str:
    for rx, rep in _MASKS:
        line = rx.sub(rep, line)
    for rx in extra:
        line = re.sub(rx, "<varies>", line)
    return line.rstrip()


def _close_text():
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "picturecheck", TOP / "testsuite" / "tmdb.views" / "picturecheck.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.close_text


# a line matches up to its numbers' last digits (picturecheck.close_text):
# the manual's runs are computed by the CPU the tests run on
close_text = _close_text()


def _match(want: list[str], got: list[str]) -> bool:
    """want (with `...` lines) against got, both masked."""
    def rec(i, j):
        while i < len(want):
            if want[i] == "...":
                return any(rec(i + 1, k) for k in range(j, len(got) + 1))
            if j >= len(got) or not close_text(want[i], got[j]):
                return False
            i, j = i + 1, j + 1
        return j == len(got)
    return rec(0, 0)


def _diff(what: str, want: list[str], got: list[str]) -> str:
    import difflib
    return f"{what}:\n" + "\n".join(difflib.unified_diff(want, got, "printed", "ran",
                                                         lineterm="", n=2))


# ------------------------------------------------------------------ running

class Sandbox:
    def __init__(self, root: Path):
        self.root = root
        build = Path(TMDB).resolve().parents[2]
        (root / "tmp").mkdir()
        ex = root / "examples"
        ex.mkdir()
        for d in (TOP / "examples", build / "examples"):
            if d.is_dir():
                for f in d.iterdir():
                    if not (ex / f.name).exists():
                        (ex / f.name).symlink_to(f)
        bindir = root / "bin"
        bindir.mkdir()
        (bindir / "tmdb").symlink_to(Path(TMDB).resolve())
        for py in ("python", "python3"):
            (bindir / py).symlink_to(sys.executable)
        probe = bindir / "tensormorph-probe"
        probe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tensormorph_probe "$@"\n')
        probe.chmod(0o755)
        torchrun = shutil.which("torchrun")
        if torchrun:
            (bindir / "torchrun").symlink_to(torchrun)
        self.env = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '')}",
                        XDG_RUNTIME_DIR=str(root / "run"), HOME=str(root), NO_COLOR="1",
                        COLUMNS="100", LINES="40", PYTHONUNBUFFERED="1")
        (root / "run").mkdir(mode=0o700)

    def shell(self, cmd: str, stdin: str | None = None, timeout: int = 600) -> list[str]:
        cmd = cmd.replace("/tmp/", f"{self.root}/tmp/")
        r = subprocess.run(["bash", "-c", "{\n" + cmd + "\n} 2>&1"], cwd=self.root, env=self.env,
                           input=stdin if stdin is not None else "", text=True,
                           stdout=subprocess.PIPE, timeout=timeout)
        text = (r.stdout.replace(f"{self.root}/tmp/", "/tmp/")
                .replace(f"{self.root}/bin/", "/usr/bin/").replace(f"{self.root}/", ""))
        return text.splitlines()


_UPDATE = os.environ.get("TM_DOCTEST_UPDATE", "") not in ("", "0")
_updates: dict[str, list[tuple[int, int, list[str]]]] = {}


def _note_update(u: Unit, first: int, want: list[str], got: list[str]) -> None:
    """Replace the printed output at 1-based line first (len(want) lines)."""
    if "..." in want:
        return
    while got and not got[-1].strip():
        got = got[:-1]
    n = len(want)
    while n and not want[n - 1].strip():
        n -= 1
    _updates.setdefault(u.doc, []).append((first - 1, n, got))


def _write_updates() -> None:
    for doc in DOCS:
        edits = _updates.get(doc.name)
        if not edits:
            continue
        lines = doc.read_text().split("\n")
        indent = "" if doc.suffix == ".md" else "    "
        for start, n, got in sorted(edits, reverse=True):
            lines[start:start + n] = [(indent + g).rstrip() if g else "" for g in got]
        doc.write_text("\n".join(lines))


def _run(sb: Sandbox, u: Unit) -> list[str]:
    """Failures of one unit, as messages."""
    for cmd in u.setup:
        sb.shell(cmd)
    m = re.match(r"cat (\S+)$", u.cmd)
    if m and not u.tmdb:
        (sb.root / m.group(1)).write_text("\n".join(u.out) + "\n")
        return []
    if not u.tmdb:
        raw = sb.shell(u.cmd)
        got = [_mask(x, u.masks) for x in raw]
        want = [_mask(x, u.masks) for x in u.out]
        while want and not want[-1]:
            want.pop()
        while got and not got[-1]:
            got.pop()
        if _match(want, got):
            return []
        if _UPDATE:
            _note_update(u, u.line + u.cmd.count("\n") + 1, u.out, raw)
        return [_diff(f"$ {u.cmd}", want, got)]
    # set trace-commands on: '+CMD' lines cut the output into each command's
    stdin = "set trace-commands on\n" + "".join(c + "\n" for c, _, _ in u.steps)
    # a typed command's /tmp paths are the sandbox's too (heatmap -png /tmp/F)
    stdin = stdin.replace("/tmp/", f"{sb.root}/tmp/")
    out = sb.shell(u.cmd, stdin=stdin)
    cuts = []
    j = 0
    for c, _, line_no in u.steps:
        while j < len(out) and out[j] != "+" + c:
            j += 1
        if j == len(out):
            return [f"line {line_no}: (tmdb) {c} was never run; output:\n" + "\n".join(out)]
        cuts.append(j)
        j += 1
    errors = []
    pieces = [(f"$ {u.cmd}", u.out, out[:cuts[0]] if cuts else out,
               u.line + u.cmd.count("\n") + 1)]
    for k, (c, want, line_no) in enumerate(u.steps):
        end = cuts[k + 1] if k + 1 < len(cuts) else len(out)
        pieces.append((f"line {line_no}: (tmdb) {c}", want, out[cuts[k] + 1:end], line_no + 1))
    for what, want, got, first in pieces:
        want_m = [_mask(x, u.masks) for x in want]
        got_m = [_mask(x, u.masks) for x in got]
        # a block ends where the document stops showing: trailing blank lines
        while want_m and not want_m[-1]:
            want_m.pop()
        while got_m and not got_m[-1]:
            got_m.pop()
        if not _match(want_m, got_m):
            errors.append(_diff(what, want_m, got_m))
            if _UPDATE:
                _note_update(u, first, want, got)
    return errors


def _all_units():
    out = []
    for doc in DOCS:
        for u in _units(doc):
            if isinstance(u, tuple):
                out.append(pytest.param(None, id=u[1].split(":")[0] + ":" + u[1].split(":")[1],
                                        marks=pytest.mark.skip(reason=u[1])))
            else:
                marks = [pytest.mark.slow] if "torchrun" in u.cmd else []
                out.append(pytest.param(u, id=u.name, marks=marks))
    return out


@pytest.fixture(scope="module")
def sandboxes(tmp_path_factory):
    """One sandbox per document: its sessions build on each other."""
    boxes: dict[str, Sandbox] = {}

    def get(doc: str) -> Sandbox:
        if doc not in boxes:
            boxes[doc] = Sandbox(tmp_path_factory.mktemp(doc.replace(".", "_")))
        return boxes[doc]
    yield get
    if _UPDATE:
        _write_updates()


@pytest.mark.parametrize("want,got,same", [
    ("$1 = 7.929102e22", "$1 = 7.929672e22", True),       # another CPU's last digits
    ("-1.08036  0.5", "-1.08035  0.5", True),
    ("tensor.abs_max = 3.25", "tensor.abs_max = 3.5", False),
    ("$2 = 32", "$2 = 33", False),                        # a count
    ("$3 = 226296944", "$3 = 226306400", True),          # an integral value
    ("fc1:out[0,3]:\t0x40cc49f6", "fc1:out[0,3]:\t0x40cc49f8", True),  # a float's bits
    ("nan_count 998", "nan_count 999", False),
    ("at step 3, fwd", "at step 4, fwd", False),
    ("@1:model.layers.11.mlp (out)", "@1:model.layers.12.mlp (out)", False),
    ("Breakpoint 1, model.proj", "Watchpoint 1, model.proj", False),
])
def test_numbers_match_to_their_fourth_digit(want, got, same):
    """A printed value may differ in its last digits between CPUs (the
    manual's sessions, run on another one); a small count, a step or a
    node's index may not, nor a word."""
    assert close_text(want, got) is same


@pytest.mark.parametrize("unit", _all_units())
def test_doc_session(unit, sandboxes):
    errors = _run(sandboxes(unit.doc), unit)
    assert not errors, f"{unit.name} does not run as printed:\n" + "\n\n".join(errors)


# ------------------------------------------------------------------ pictures

# The pictures the manual shows (doc/img) are the ones its session writes:
# drawn again by that session in the sandbox and compared with the
# committed files by tmdb.views/picturecheck.py (the same SVG text and cell
# colours, PNGs of the same size differing in under 10% of their pixels, as
# fonts differ between machines).  TM_DOCTEST_UPDATE=1 copies them in.
PICTURES = ["heatmap", "plot"]


@pytest.mark.parametrize("name", PICTURES)
def test_doc_picture(name, sandboxes):
    sb = sandboxes("manual.md")
    new_png, new_svg = sb.root / "tmp" / f"{name}.png", sb.root / "tmp" / f"{name}.svg"
    old_png, old_svg = TOP / "doc" / "img" / f"{name}.png", TOP / "doc" / "img" / f"{name}.svg"
    assert new_png.exists() and new_svg.exists(), \
        f"the manual's session did not write /tmp/{name}.png and .svg (run the whole file)"
    if _UPDATE:
        old_png.parent.mkdir(exist_ok=True)
        shutil.copyfile(new_png, old_png)
        shutil.copyfile(new_svg, old_svg)
    check = TOP / "testsuite" / "tmdb.views" / "picturecheck.py"
    r = subprocess.run([sys.executable, str(check), "same", str(new_png), str(old_png),
                        str(new_svg), str(old_svg)], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    assert r.returncode == 0, r.stdout
