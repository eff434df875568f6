"""The serving plugins' contract with the real vLLM and SGLang: every row of
tensormorph_probe/serving/touchpoints.py (each module, class, method,
attribute, config field and environment variable the plugins touch) is
checked in the released packages' Python source.

The wheels are downloaded without dependencies (`pip download --no-deps
--only-binary=:all:`) into a cache outside the repository,
$TENSORMORPH_CONTRACT_CACHE or ~/.cache/tensormorph-contract (a vLLM wheel
is over 300 MB: CI should keep that directory between runs), and read as
source: only the .py members the table names are read out of the zip and
parsed with ast.  Nothing is installed or imported.  A version that cannot
be had (no network, no wheel for it) is skipped with the reason.

Versions checked: the oldest and newest supported (touchpoints.SUPPORTED)
and the newest release on the index ("newest"); TENSORMORPH_CONTRACT_VERSIONS
(e.g. "vllm==0.31.0 sglang==newest") replaces that list.  A newest release
past the supported range whose touch points fail is an expected failure
that names them (a release is not a fault of this tree); one whose touch
points hold says to raise the range.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import zipfile
from functools import cache
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PLUGINS = HERE.parent.parent / "probes" / "pytorch" / "tensormorph_probe" / "serving"
sys.path.insert(0, str(PLUGINS.parent.parent))
from tensormorph_probe.serving import touchpoints as tpt  # noqa: E402

CACHE = Path(os.environ.get("TENSORMORPH_CONTRACT_CACHE")
             or Path.home() / ".cache" / "tensormorph-contract")
# the wheels are built for CPython 3.11 on manylinux (SGLang's only for
# cp311): ask for those whatever runs the test
PLATFORM = ["--python-version", "3.11", "--platform", "manylinux_2_34_x86_64",
            "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64",
            "--only-binary=:all:", "--no-deps"]


def _versions() -> list[tuple[str, str]]:
    spec = os.environ.get("TENSORMORPH_CONTRACT_VERSIONS")
    if spec:
        return [tuple(x.split("==", 1)) for x in spec.split()]   # type: ignore[misc]
    out = []
    for fw, (lo, hi) in tpt.SUPPORTED.items():
        out += [(fw, lo), (fw, hi), (fw, "newest")]
    return out


def _cached(framework: str, version: str) -> Path | None:
    hits = sorted(CACHE.glob(f"{framework}-{version}-*.whl"))
    return hits[0] if hits else None


@cache
def wheel(framework: str, version: str) -> tuple[Path | None, str]:
    """(the wheel, "") or (None, why not)."""
    if version != "newest":
        hit = _cached(framework, version)
        if hit is not None:
            return hit, ""
    CACHE.mkdir(parents=True, exist_ok=True)
    req = framework if version == "newest" else f"{framework}=={version}"
    try:
        r = subprocess.run([sys.executable, "-m", "pip", "download", *PLATFORM, "-d", str(CACHE),
                            "--progress-bar", "off", req],
                           capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"pip download {req} failed: {exc}"
    m = re.search(r"(?:Saved|File was already downloaded) (\S+\.whl)", r.stdout)
    if r.returncode != 0 or not m:
        tail = (r.stdout + r.stderr).strip().splitlines()[-3:]
        return None, f"pip download {req} failed (no network?): " + " | ".join(tail)
    return Path(m.group(1)), ""


class Source:
    """The .py members of one wheel, parsed on demand."""

    def __init__(self, path: Path) -> None:
        self.zip = zipfile.ZipFile(path)
        self.names = set(self.zip.namelist())
        self.version = path.name.split("-")[1]

    @cache  # noqa: B019 (a handful of Source objects per test session)
    def module(self, dotted: str) -> ast.Module | None:
        base = dotted.replace(".", "/")
        for member in (base + ".py", base + "/__init__.py"):
            if member in self.names:
                return ast.parse(self.zip.read(member), member)
        return None


def _class(mod: ast.Module, name: str) -> ast.ClassDef | None:
    for node in mod.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def _class_has(mod: ast.Module, cls: ast.ClassDef, attr: str, seen: set[str]) -> bool:
    """attr is a field, property, method or self.attr of cls, or of a base
    class defined in the same module."""
    for node in cls.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == attr:
            return True
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and node.target.id == attr:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr
                                                for t in node.targets):
            return True
    for node in ast.walk(cls):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign) else [])
        for t in targets:
            if isinstance(t, ast.Attribute) and t.attr == attr and \
                    isinstance(t.value, ast.Name) and t.value.id == "self":
                return True
    seen.add(cls.name)
    for b in cls.bases:
        if isinstance(b, ast.Name) and b.id not in seen:
            base = _class(mod, b.id)
            if base is not None and _class_has(mod, base, attr, seen):
                return True
    return False


def check(src: Source, t: tpt.TouchPoint) -> str | None:
    """None when t holds in src, else what is missing."""
    mod = src.module(t.module)
    if mod is None:
        return f"no module {t.module}"
    if t.kind == "module":
        return None
    if t.kind == "literal":
        # a string constant, or a name the module assigns (SGLang's Envs
        # class declares SGLANG_PLUGINS = EnvStr(...))
        ok = any((isinstance(n, ast.Constant) and n.value == t.name)
                 or (isinstance(n, ast.Name) and n.id == t.name and isinstance(n.ctx, ast.Store))
                 for n in ast.walk(mod))
        return None if ok else f"no string {t.name!r} in {t.module}"
    if t.kind in ("function", "class"):
        want = (ast.FunctionDef, ast.AsyncFunctionDef) if t.kind == "function" else ast.ClassDef
        ok = any(isinstance(n, want) and n.name == t.name for n in mod.body)
        return None if ok else f"no {t.kind} {t.name} in {t.module}"
    cname, _, rest = t.name.partition(".")
    cls = _class(mod, cname)
    if cls is None:
        return f"no class {cname} in {t.module}"
    if t.kind == "attr":
        return None if _class_has(mod, cls, rest, set()) else f"no {t.name} in {t.module}"
    meth, _, param = rest.partition("(")
    fn = next((n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
               and n.name == meth), None)
    if fn is None:
        return f"no method {cname}.{meth} in {t.module}"
    if t.kind == "method":
        return None
    a = fn.args
    names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    return None if param.rstrip(")") in names else f"{cname}.{meth} takes no {param.rstrip(')')}"


def contract_faults(framework: str, version: str,
                    checked: list[tuple[tpt.TouchPoint, str | None]]) -> list[str]:
    """What a release lacks of the table, from each row and its check (None:
    it holds).  A required row must hold; an optional group holds whole or
    is absent whole (half of it: the plugin takes the path and fails); a
    group of alternatives holds when every row of one of its paths does."""
    missing: list[str] = []
    optional: dict[str, list[tuple[tpt.TouchPoint, str | None]]] = {}
    paths: dict[str, dict[str, list[str | None]]] = {}
    for t, err in checked:
        group, _, path = t.alt.partition("/")
        if group == "optional":
            optional.setdefault(path, []).append((t, err))
        elif group:
            paths.setdefault(group, {}).setdefault(path, []).append(err)
        elif err is not None:
            missing.append(f"{t.kind} {t.module}:{t.name} ({t.use}): {err}")
    for name, got in optional.items():
        absent = [t.name for t, err in got if err is not None]
        if absent and len(absent) < len(got):
            there = [t.name for t, err in got if err is None]
            missing.append(f"optional {name!r} half there: {', '.join(there)} but not "
                           f"{', '.join(absent)}")
        elif absent:
            print(f"{framework} {version}: optional {name!r} absent ({', '.join(absent)})")
    for group, by_path in paths.items():
        if not any(all(e is None for e in errs) for errs in by_path.values()):
            missing.append(f"alternatives {group!r}: no path holds whole: "
                           + "; ".join(f"{p or '-'}: {[e for e in errs if e]}"
                                       for p, errs in by_path.items()))
    return missing


def test_contract_faults():
    """The rules on made-up checks: a half-present optional group and a
    group whose every path lacks a row are faults; an absent optional group
    and one whole path among broken ones are not."""
    def tp(name, alt=""):
        return tpt.TouchPoint("vllm", "attr", "m", name, "use", alt)

    def faults(*rows):
        return contract_faults("vllm", "0", list(rows))

    assert faults((tp("a"), None), (tp("b", "optional/x"), "gone"),
                  (tp("c", "optional/x"), "gone")) == []
    half = faults((tp("b", "optional/x"), None), (tp("c", "optional/x"), "gone"))
    assert half == ["optional 'x' half there: b but not c"]
    one_whole = faults((tp("p", "g/1"), "gone"), (tp("q", "g/1"), None),
                       (tp("r", "g/2"), None), (tp("s", "g/2"), None))
    assert one_whole == []
    none_whole = faults((tp("p", "g/1"), "gone"), (tp("q", "g/1"), None),
                        (tp("r", "g/2"), None), (tp("s", "g/2"), "gone"))
    assert len(none_whole) == 1 and none_whole[0].startswith("alternatives 'g'")
    assert faults((tp("a"), "gone")) == ["attr m:a (use): gone"]


def test_alt_names_a_group_and_path():
    """Every alt is "", optional/NAME or GROUP/PATH, and a group of
    alternatives has more than one path (a group of one is a required row
    said twice)."""
    groups: dict[str, set[str]] = {}
    for t in tpt.TOUCH_POINTS:
        if t.alt:
            group, sep, path = t.alt.partition("/")
            assert sep and group and path, t
            groups.setdefault(group, set()).add(path)
    for group, ps in groups.items():
        assert group == "optional" or len(ps) > 1, (group, ps)


# slow: the wheels are large; the normal build's run checks them, the
# sanitizer run and distcheck (TM_QUICK) repeat nothing by reading them again
@pytest.mark.slow
@pytest.mark.parametrize("framework,version", _versions(),
                         ids=[f"{f}-{v}" for f, v in _versions()])
def test_touch_points_in_released_source(framework, version):
    path, why = wheel(framework, version)
    if path is None:
        pytest.skip(why)
    src = Source(path)
    rows = tpt.rows(framework)
    missing = contract_faults(framework, src.version, [(t, check(src, t)) for t in rows])
    hi = tpt.SUPPORTED[framework][1]
    past = version == "newest" and tpt.version_tuple(src.version) > tpt.version_tuple(hi)
    lacks = (f"{framework} {src.version} ({path.name}) lacks what the plugins use:\n  "
             + "\n  ".join(missing))
    if missing and past:
        # a release past the supported range that the plugins do not fit
        # yet: news to act on, said in the log, but not a fault of this
        # tree (the supported range still holds)
        pytest.xfail("newer than the supported range, not supported yet: " + lacks)
    assert not missing, lacks
    if past:
        # not a failure: the table holds; the range should be widened
        print(f"{framework} {src.version} is newer than {hi} and its touch points hold: "
              "raise touchpoints.SUPPORTED")


# ------------------------------------------------------------------ the table is complete

# names the plugin modules read with getattr/hasattr that are not vLLM's or
# SGLang's: the plugins' own marks and Python's (enum .name / .value)
OWN = {"_tensormorph", "_tensormorph_requests", "name", "value"}


def _plugin_uses(path: Path) -> tuple[set[str], set[str]]:
    """(attribute names read with getattr/hasattr, dotted framework names in
    string constants and imports) of one plugin module."""
    tree = ast.parse(path.read_text(), str(path))
    attrs, dotted = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
                n.func.id in ("getattr", "hasattr") and len(n.args) >= 2 and \
                isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str):
            attrs.add(n.args[1].value)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and \
                re.fullmatch(r"(vllm|sglang)(\.\w+)+", n.value):
            dotted.add(n.value)
        if isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] in (
                "vllm", "sglang"):
            dotted.add(n.module)
            attrs.update(a.name for a in n.names)
    return attrs, dotted


def test_table_lists_every_name_the_plugins_use():
    """Every framework attribute the plugins read (getattr/hasattr and
    `from ... import`) and every framework path in their strings is in
    TOUCH_POINTS: a name added to a plugin without a row fails here."""
    known = set()
    paths = set()
    for t in tpt.TOUCH_POINTS:
        leaf = t.name.split(".")[-1].split("(")[0]
        known.add(leaf)
        param = re.search(r"\((\w+)\)", t.name)
        if param:
            known.add(param.group(1))
        paths.add(t.module)
        paths.add(t.name)
        paths.add(f"{t.module}.{t.name.split('(')[0]}")
        # the package a module is imported from: `from sglang.srt import runtime_context`
        paths.add(t.module.rsplit(".", 1)[0])
        known.add(t.module.rsplit(".", 1)[-1])
    # names in SGLang's resolved exec namespace reached through attributes
    known |= {"graph", "decode", "prefill"}
    problems = []
    for f in ("vllm.py", "sglang.py"):
        attrs, dotted = _plugin_uses(PLUGINS / f)
        for a in sorted(attrs - known - OWN):
            problems.append(f"{f}: reads {a!r}, which no TOUCH_POINTS row names")
        for d in sorted(dotted - paths):
            problems.append(f"{f}: uses {d!r}, which no TOUCH_POINTS row names")
    assert not problems, "\n".join(problems)


def test_checker_catches_a_missing_name(tmp_path):
    """The checker is not vacuous: rows that do not hold in a wheel are
    reported."""
    whl = tmp_path / "fake-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("fake/mod.py", "class A:\n    x: int = 0\n    def f(self, a, *, b=1):\n"
                   "        self.y = 2\nclass B(A):\n    pass\nNAME = 'fake.group'\n")
    src = Source(whl)
    T = tpt.TouchPoint
    assert check(src, T("fake", "attr", "fake.mod", "A.x", "")) is None
    assert check(src, T("fake", "attr", "fake.mod", "A.y", "")) is None
    assert check(src, T("fake", "attr", "fake.mod", "B.y", "")) is None
    assert check(src, T("fake", "param", "fake.mod", "A.f(b)", "")) is None
    assert check(src, T("fake", "literal", "fake.mod", "fake.group", "")) is None
    assert check(src, T("fake", "attr", "fake.mod", "A.z", "")) == "no A.z in fake.mod"
    assert check(src, T("fake", "param", "fake.mod", "A.f(c)", "")) == "A.f takes no c"
    assert check(src, T("fake", "method", "fake.mod", "A.g", "")) is not None
    assert check(src, T("fake", "class", "fake.other", "A", "")) == "no module fake.other"
