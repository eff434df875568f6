#!/bin/sh
# run-pytest.sh -- make check driver for the PyTorch probe tests (pytest on
# real models): make check runs each test file as a test of its own
# (PY_LOG_COMPILER), so that make -j runs them side by side.  By hand:
#   run-pytest.sh [FILE.py] [PYTEST-ARGS]   (FILE.py: a path, or a name in
#   testsuite/probes; no file: TM_PYTEST_FILES, else every test file)
# Uses the library of this build tree and the probe package of this source
# tree.  Exit 77 (skip) when torch or pytest is missing, or when nothing
# is left to run.  In a sanitizer build python runs with the sanitizer
# runtimes preloaded.
srcdir=${srcdir:-$(dirname "$0")/..}
top_srcdir=$(cd "$srcdir/.." && pwd)
PYTHON=${PYTHON:-python3}
lib=${TENSORMORPH_LIB:-$(pwd)/../src/lib/.libs/libtensormorph.so}

if ! "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
	echo "SKIP: torch is not importable by $PYTHON (pip install torch==2.13.0)"
	exit 77
fi
if ! "$PYTHON" -c 'import pytest' >/dev/null 2>&1; then
	echo "SKIP: pytest is not importable by $PYTHON (pip install pytest)"
	exit 77
fi
if [ ! -d "$top_srcdir/probes/pytorch/tensormorph_probe" ]; then
	echo "SKIP: $top_srcdir/probes/pytorch is not in this tree (add probes to EXTRA_DIST)"
	exit 77
fi
if [ ! -f "$lib" ]; then
	echo "FAIL: $lib not found (build the library first)"
	exit 1
fi
# A sanitizer build can only be dlopen'ed into python with its runtimes
# preloaded; Python's own allocations look like leaks, so leak checks are off.
if ldd "$lib" 2>/dev/null | grep -q 'libasan'; then
	san=$(ldd "$lib" | awk '/lib(asan|ubsan)\.so/ { print $3 }' | tr '\n' ':' | sed 's/:$//')
	if [ -z "$san" ]; then
		echo "SKIP: $lib is a sanitizer build and its runtimes were not found"
		exit 77
	fi
	LD_PRELOAD=$san${LD_PRELOAD:+:$LD_PRELOAD}
	ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}
	# Python objects from malloc, not pymalloc's pools: ASan then sees the
	# probe's C extension misuse them (a reference dropped twice, a write
	# past an object)
	PYTHONMALLOC=malloc
	export LD_PRELOAD ASAN_OPTIONS PYTHONMALLOC
	TM_QUICK=1
fi
TENSORMORPH_LIB=$lib
PYTHONPATH=$top_srcdir/probes/pytorch${PYTHONPATH:+:$PYTHONPATH}
# the live tests launch this build's tmdb, which finds the probe here
TMDB=${TMDB:-$(pwd)/../src/tmdb/tmdb}
TENSORMORPH_PROBE_PATH=$top_srcdir/probes/pytorch
export TENSORMORPH_LIB PYTHONPATH TMDB TENSORMORPH_PROBE_PATH
# this build made the probe's C fast path: the tests insist that it is used
for so in ../probes/pytorch/tensormorph_probe/_hook*.so; do
	[ -f "$so" ] && TENSORMORPH_EXPECT_HOOK=1 && export TENSORMORPH_EXPECT_HOOK
done
# What to run: the file make check gives (skipped when TM_PYTEST_FILES, the
# only test files to run, leaves it out: distcheck runs a few, and `make
# dist` checks that every file is in the tarball), else TM_PYTEST_FILES,
# else every test file.
# The slow tests (jobs of several ranks, compiling, the frameworks, or
# variants whose C paths others take) run in the normal build; a sanitizer
# build and distcheck (TM_QUICK=1) repeat the rest.  An -m of the
# caller's, after this one, wins.
case ${1:-} in
*.py)
	if [ -n "${TM_PYTEST_FILES:-}" ]; then
		case " $TM_PYTEST_FILES " in
		*" $(basename "$1") "*) ;;
		*) echo "SKIP: $(basename "$1") is not in TM_PYTEST_FILES ($TM_PYTEST_FILES)"
		   exit 77 ;;
		esac
	fi
	file=$1
	shift
	[ -e "$file" ] || file=$top_srcdir/testsuite/probes/$file
	if [ -n "${TM_QUICK:-}" ]; then
		set -- "$file" -m "not slow" "$@"
	else
		set -- "$file" "$@"
	fi ;;
*)
	if [ -n "${TM_QUICK:-}" ]; then
		set -- -m "not slow" "$@"
	fi
	set -- $(for f in ${TM_PYTEST_FILES:-.}; do echo "$top_srcdir/testsuite/probes/$f"; done) "$@" ;;
esac
# the slowest tests in the log: where the CI time goes
"$PYTHON" -m pytest -q -p no:cacheprovider --durations=25 "$@"
rc=$?
# 5: every test deselected (a file of slow tests under TM_QUICK), a skip
[ $rc -eq 5 ] && exit 77
exit $rc
