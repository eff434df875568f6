#!/usr/bin/env python3
"""micheck.py -- a GDB/MI output grammar checker, independent of tmdb.

Written from the GDB manual's grammar ("GDB/MI Output Syntax"), not from
tmdb's printer, so that the two can disagree:

    output       -> ( out-of-band-record )* [ result-record ] "(gdb)" nl
    result-record-> [ token ] "^" result-class ( "," result )* nl
    result-class -> "done" | "running" | "connected" | "error" | "exit"
    async-record -> [ token ] ( "*" | "+" | "=" ) async-class ( "," result )* nl
    stream-record-> ( "~" | "@" | "&" ) c-string nl
    result       -> variable "=" value
    value        -> c-string | tuple | list
    tuple        -> "{}" | "{" result ( "," result )* "}"
    list         -> "[]" | "[" value ( "," value )* "]" | "[" result ( "," result )* "]"

c-strings must be printable ASCII; escapes are \\" \\\\ \\n \\t \\r \\b \\f \\a
\\e \\v and exactly three octal digits (GDB writes control bytes and bytes
>= 0x80 so).  ^error carries msg= first (and optionally code=).

As a program: `micheck.py [FILE]` checks every line of FILE (or stdin) and
the transcript's shape (every result record followed by a prompt); exit
status 1 with the first error.  As a module: parse_line() returns a Record
with the decoded results (Python str / dict / list), check_transcript()
checks a whole session against the tokens that were sent.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Union

Value = Union[str, "Tuple", list]

RESULT_CLASSES = {"done", "running", "connected", "error", "exit"}
SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r",
                  "b": "\b", "f": "\f", "a": "\a", "e": "\033", "v": "\v"}


class MIError(ValueError):
    """A line that is not GDB/MI output."""


@dataclass
class Tuple:
    """An MI tuple (or a list of results): ordered (name, value) pairs."""
    items: list[tuple[str, Value]] = field(default_factory=list)

    def get(self, name: str, default: Value | None = None) -> Value | None:
        for k, v in self.items:
            if k == name:
                return v
        return default

    def __getitem__(self, name: str) -> Value:
        v = self.get(name)
        if v is None:
            raise KeyError(name)
        return v

    def keys(self) -> list[str]:
        return [k for k, _ in self.items]


@dataclass
class Record:
    kind: str            # "result", "exec", "status", "notify", "console",
                         # "target", "log", "prompt"
    token: str = ""
    klass: str = ""      # result or async class
    results: Tuple = field(default_factory=Tuple)
    text: str = ""       # stream records: the decoded text


class _Parser:
    def __init__(self, line: str) -> None:
        self.s = line
        self.i = 0

    def fail(self, what: str) -> MIError:
        return MIError(f"column {self.i + 1}: {what}: {self.s!r}")

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def expect(self, c: str) -> None:
        if self.peek() != c:
            raise self.fail(f"expected {c!r}")
        self.i += 1

    def cstring(self) -> str:
        self.expect('"')
        out: list[str] = []
        while True:
            c = self.peek()
            if c == "":
                raise self.fail("unterminated c-string")
            if ord(c) < 0x20 or ord(c) > 0x7e:
                raise self.fail(f"raw byte {ord(c):#x} in c-string")
            self.i += 1
            if c == '"':
                return "".join(out)
            if c != "\\":
                out.append(c)
                continue
            e = self.peek()
            if e in SIMPLE_ESCAPES:
                out.append(SIMPLE_ESCAPES[e])
                self.i += 1
            elif len(self.s) >= self.i + 3 and all(d in "01234567"
                                                   for d in self.s[self.i:self.i + 3]):
                out.append(chr(int(self.s[self.i:self.i + 3], 8)))
                self.i += 3
            else:
                raise self.fail("bad escape in c-string")

    def variable(self) -> str:
        start = self.i
        while self.peek() and (self.peek().isalnum() or self.peek() in "-_"):
            self.i += 1
        if start == self.i or not (self.s[start].isalpha() or self.s[start] == "_"):
            raise self.fail("expected a variable name")
        return self.s[start:self.i]

    def result(self) -> tuple[str, Value]:
        name = self.variable()
        self.expect("=")
        return name, self.value()

    def value(self) -> Value:
        c = self.peek()
        if c == '"':
            return self.cstring()
        if c == "{":
            return self.tuple_()
        if c == "[":
            return self.list_()
        raise self.fail("expected a value (c-string, tuple or list)")

    def tuple_(self) -> Tuple:
        self.expect("{")
        t = Tuple()
        if self.peek() == "}":
            self.i += 1
            return t
        while True:
            t.items.append(self.result())
            if self.peek() == ",":
                self.i += 1
                continue
            self.expect("}")
            return t

    def list_(self) -> list:
        self.expect("[")
        out: list = []
        if self.peek() == "]":
            self.i += 1
            return out
        of_results = self.peek() not in ('"', "{", "[")
        while True:
            if of_results:
                out.append(Tuple([self.result()]))
            else:
                out.append(self.value())
            if self.peek() == ",":
                self.i += 1
                continue
            self.expect("]")
            return out

    def results(self) -> Tuple:
        t = Tuple()
        while self.peek() == ",":
            self.i += 1
            t.items.append(self.result())
        return t

    def end(self) -> None:
        if self.i != len(self.s):
            raise self.fail("junk at end of record")


def parse_line(line: str) -> Record:
    """Parses one output line (without its newline)."""
    if line in ("(gdb) ", "(gdb)"):
        return Record("prompt")
    p = _Parser(line)
    c = p.peek()
    if c in "~@&" and c:
        p.i += 1
        text = p.cstring()
        p.end()
        return Record({"~": "console", "@": "target", "&": "log"}[c], text=text)
    start = p.i
    while p.peek().isdigit():
        p.i += 1
    token = line[start:p.i]
    c = p.peek()
    if c not in ("^", "*", "+", "=") or not c:
        raise p.fail("not an MI record")
    p.i += 1
    start = p.i
    while p.peek() and (p.peek().isalnum() or p.peek() in "-_"):
        p.i += 1
    klass = line[start:p.i]
    if not klass:
        raise p.fail("missing record class")
    if c == "^" and klass not in RESULT_CLASSES:
        raise p.fail(f"unknown result class {klass!r}")
    results = p.results()
    p.end()
    kind = {"^": "result", "*": "exec", "+": "status", "=": "notify"}[c]
    if kind == "result" and klass == "error":
        keys = results.keys()
        if not keys or keys[0] != "msg" or not isinstance(results["msg"], str):
            raise MIError(f"^error without msg=\"...\" first: {line!r}")
        if any(k not in ("msg", "code") for k in keys):
            raise MIError(f"^error with keys other than msg/code: {line!r}")
    if kind == "exec" and klass == "stopped" and results.get("reason") is None \
            and results.get("frame") is None:
        raise MIError(f"*stopped with neither reason nor frame: {line!r}")
    return Record(kind, token, klass, results)


def check_transcript(lines: list[str], tokens: list[str] | None = None,
                     exited: bool = False) -> list[Record]:
    """Checks every line and the session's shape; returns the records.

    Each result record must be followed by a prompt line (async records
    may come between, as GDB writes them after ^running); with tokens (one
    entry per command sent, "" for none) the result records must answer
    them one by one, in order, echoing each token.
    """
    records = []
    for n, line in enumerate(lines, 1):
        try:
            records.append(parse_line(line))
        except MIError as e:
            raise MIError(f"line {n}: {e}") from None
    results = [i for i, r in enumerate(records) if r.kind == "result"]
    for i in results:
        r = records[i]
        if r.klass == "exit":
            if i != len(records) - 1:
                raise MIError(f"line {i + 1}: output after ^exit")
            continue
        # GDB itself writes ^running, *running,thread-id="all", (gdb): async
        # records may come between a result and its prompt, nothing else.
        j = i + 1
        while j < len(records) and records[j].kind in ("exec", "notify", "status"):
            j += 1
        if j >= len(records) or records[j].kind != "prompt":
            raise MIError(f"line {i + 1}: result record not followed by (gdb)")
    if tokens is not None:
        got = [records[i].token for i in results]
        if len(got) != len(tokens):
            raise MIError(f"{len(tokens)} commands sent, {len(got)} result "
                          f"records received")
        for k, (want, have) in enumerate(zip(tokens, got)):
            if want != have:
                raise MIError(f"command {k + 1}: token {want!r} answered "
                              f"with {have!r}")
    if exited and (not results or records[results[-1]].klass != "exit"):
        raise MIError("session did not end with ^exit")
    if records and not exited and records[-1].kind != "prompt":
        raise MIError("output does not end with a (gdb) prompt")
    return records


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "-"
    fp = sys.stdin if path == "-" else open(path, encoding="ascii", errors="replace")
    with fp:
        lines = fp.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    try:
        records = check_transcript(lines, exited=any(ln.endswith("^exit") for ln in lines))
    except MIError as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 1
    print(f"{path}: {len(records)} MI records, grammar OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
