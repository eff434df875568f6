"""The probe's mirrors of libtensormorph's headers (ctypes structs, the
struct.Struct batch views, constants, and the C fast path's batch structs)
are checked against the library's own layout table (tm_layout) when the
probe loads: they agree in this build, and each kind of deliberate
mismatch is refused with a message that names it."""

from __future__ import annotations

import ctypes
import os

import pytest

from tensormorph_probe import _lib


@pytest.fixture(scope="module")
def table():
    return _lib.layout_table(_lib.load())


def test_every_mirror_agrees_with_the_library(table):
    assert _lib.layout_mismatches(table) == []
    _lib.check_layout(_lib.load())
    # every mirrored struct and every field of it is described
    for cls, cname in _lib.MIRRORS:
        assert table[f"{cname}.sizeof"] == ctypes.sizeof(cls)
        for field in cls._fields_:
            assert f"{cname}.{field[0]}.offset" in table


def test_fast_path_agrees_with_the_library(table):
    hook = _lib.load_hook()
    if hook is None:
        if os.environ.get("TENSORMORPH_EXPECT_HOOK"):
            pytest.fail("this build made the C fast path but the probe does not load it")
        pytest.skip("no C fast path in this build")
    layout = hook.layout()
    assert layout["tm_rec_tensor.done.offset"] == table["tm_rec_tensor.done.offset"]
    assert len(layout) > 60          # every field, offset and size
    _lib.check_hook_layout(layout, table, "_hook")


def test_a_moved_field_is_named(table):
    class Same(ctypes.Structure):
        _fields_ = list(_lib.RecEvent._fields_)
    fields = list(_lib.RecEvent._fields_)
    k = [f[0] for f in fields].index("kind")
    fields[k], fields[k + 1] = fields[k + 1], fields[k]

    class Moved(ctypes.Structure):   # kind and phase exchanged
        _fields_ = fields
    bad = _lib.layout_mismatches(table, mirrors=((Moved, "tm_rec_event"),), constants={},
                                 views=False)
    assert "struct tm_rec_event field kind: offset is 45 here but 44 in the library" in bad
    assert "struct tm_rec_event field phase: offset is 44 here but 45 in the library" in bad
    assert _lib.layout_mismatches(table, mirrors=((Same, "tm_rec_event"),), constants={},
                                  views=False) == []


def test_a_wrong_size_is_named(table):
    class Short(ctypes.Structure):   # the last field forgotten
        _fields_ = _lib.Gap._fields_[:-1]

    class Wide(ctypes.Structure):    # a count one size too wide
        _fields_ = [(n, ctypes.c_uint64 if n == "reason" else t) for n, t in _lib.Gap._fields_]
    bad = _lib.layout_mismatches(table, mirrors=((Short, "tm_gap"),), constants={}, views=False)
    assert bad == [f"sizeof(struct tm_gap) (Short) is {ctypes.sizeof(Short)} here but "
                   f"{table['tm_gap.sizeof']} in the library"]
    bad = _lib.layout_mismatches(table, mirrors=((Wide, "tm_gap"),), constants={}, views=False)
    assert "struct tm_gap field reason: size is 8 here but 4 in the library" in bad


def test_a_field_the_library_does_not_have_is_named(table):
    class Extra(ctypes.Structure):
        _fields_ = list(_lib.Slot._fields_) + [("colour", ctypes.c_uint8)]
    bad = _lib.layout_mismatches(table, mirrors=((Extra, "tm_slot"),), constants={}, views=False)
    assert any("tm_slot.colour.offset" in b and "does not describe" in b for b in bad)


def test_a_wrong_constant_fails_the_load(monkeypatch):
    monkeypatch.setattr(_lib, "TM_ERR_AGAIN", 99)
    monkeypatch.setattr(_lib, "SLOT_GRAD", 7)
    with pytest.raises(_lib.LayoutMismatch) as exc:
        _lib.load.__wrapped__()
    msg = str(exc.value)
    assert "constant TM_ERR_AGAIN is 99 here but 18 in the library" in msg
    assert "constant TM_SLOT_GRAD is 7 here but 5 in the library" in msg
    assert _lib.load().path in msg


def test_a_wrong_batch_view_fails_the_load(monkeypatch):
    monkeypatch.setattr(_lib, "OFF_HAVE_HIST", 31)
    monkeypatch.setattr(_lib, "STAT_NAMES", _lib.STAT_NAMES[:2] + ("inf", ) + _lib.STAT_NAMES[3:])
    with pytest.raises(_lib.LayoutMismatch) as exc:
        _lib.load.__wrapped__()
    msg = str(exc.value)
    assert "OFF_HAVE_HIST is 31 here but 30 in the library" in msg
    assert "STAT_NAMES[2] is 'inf'" in msg


def test_a_fast_path_of_another_layout_is_refused(table):
    layout = dict(_lib.load_hook().layout()) if _lib.load_hook() else {
        "tm_rec_tensor.sizeof": table["tm_rec_tensor.sizeof"]}
    layout["tm_rec_tensor.done.offset"] = 40
    layout["TM_MAX_RANK"] = 6
    with pytest.raises(_lib.LayoutMismatch) as exc:
        _lib.check_hook_layout(layout, table, "/x/_hook.so")
    msg = str(exc.value)
    assert "/x/_hook.so" in msg
    assert "tm_rec_tensor.done.offset is 40 in the fast path but 31 in the library" in msg
    assert "TM_MAX_RANK is 6 in the fast path but 8 in the library" in msg
    assert "TENSORMORPH_NO_HOOK=1" in msg
    # a fast path of an older probe answers layout() with a tuple
    with pytest.raises(_lib.LayoutMismatch, match="older probe"):
        _lib.check_hook_layout((48, 336, 32, 31), table, "/x/_hook.so")


def test_a_library_without_a_layout_table_is_refused():
    class Old:
        path = "/old/libtensormorph.so"
    with pytest.raises(_lib.LayoutMismatch, match="/old/libtensormorph.so has no tm_layout"):
        _lib.layout_table(Old())
