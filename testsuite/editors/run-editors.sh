#!/bin/sh
# run-editors.sh -- make check driver for tmdb in the GDB front ends of
# Emacs and Vim, each driven for real:
#   emacs-gdb.el       Emacs's gdb-mi (M-x gdb, "tmdb -i=mi"), emacs --batch
#   vim-termdebug.vim  Vim's termdebug in its prompt mode (MI on tmdb's
#                      stdin) and its default mode (tmdb's command line in a
#                      terminal window, MI on a second terminal: new-ui),
#                      Vim running in a pseudo-terminal (vim-run.py, pexpect)
# Each sets a breakpoint on a source line, runs to it, clears it, breaks at
# the first NaN (break model.** if tensor.nan_count > 0), continues there,
# reads the focus tensor (Emacs's locals buffer, Vim's :Evaluate), steps,
# and quits.
#
# On a recording (lib/mktrace's, whose source is lib/model.py) in every
# build; on the live program examples/train_diverge.py (torch) in the normal
# build only: a sanitizer build and distcheck (TM_QUICK=1) leave it out.
# An editor that is not installed is skipped with a message (./setup
# installs emacs-nox and vim); neither: 77.
srcdir=${srcdir:-$(dirname "$0")/..}
top_srcdir=$(cd "$srcdir/.." && pwd)
here=$(cd "$srcdir/editors" && pwd)
PYTHON=${PYTHON:-python3}
build=$(pwd)
lib=${TENSORMORPH_LIB:-$build/../src/lib/.libs/libtensormorph.so}
TMDB=${TMDB:-$build/../src/tmdb/tmdb}
TMDB=$(cd "$(dirname "$TMDB")" && pwd)/$(basename "$TMDB")
export TMDB

have_emacs=1 have_vim=1
command -v emacs >/dev/null 2>&1 || { have_emacs=0; echo "SKIP emacs: not installed (apt-get install emacs-nox)"; }
if ! command -v vim >/dev/null 2>&1 || ! vim --version | grep -q '+terminal'; then
	have_vim=0
	echo "SKIP vim: no vim with +terminal (apt-get install vim)"
elif ! "$PYTHON" -c 'import pexpect' >/dev/null 2>&1; then
	have_vim=0
	echo "SKIP vim: pexpect is not installed (pip install pexpect)"
fi
[ $have_emacs = 0 ] && [ $have_vim = 0 ] && exit 77

work=$build/editors.work
rm -rf "$work"
mkdir -p "$work"
cp "$srcdir/lib/model.py" "$work/model.py"
(cd "$work" && "$build/lib/mktrace" -o trace.tmrun --source model.py) || exit 1
HOME=$work
export HOME
fail=0

# run NAME CMD...: one session; its output indented, FAIL lines kept
run() {
	name=$1; shift
	echo "== $name"
	t0=$(date +%s)
	if "$@" >"$work/$name.log" 2>&1; then
		grep -E '^(ok|FAIL)' "$work/$name.log" | sed 's/^/  /'
		echo "PASS $name ($(($(date +%s) - t0)) s)"
	else
		sed 's/^/  /' "$work/$name.log" | tail -n 60
		echo "FAIL $name ($(($(date +%s) - t0)) s)"
		fail=1
	fi
}

emacs_session() {
	(cd "$work" && timeout 300 emacs -Q --batch -l "$here/emacs-gdb.el" -f tm-emacs-main)
}

# the recording: lib/model.py's MLP.forward holds line 28; the first NaN
# is in model.layers.2.mlp.fc2, whose forward() is line 47
TM_ARGS=$work/trace.tmrun TM_SOURCE=$work/model.py TM_LINE=28
TM_NAN_FUNC=model.layers.2.mlp.fc2 TM_NAN_FILE=model.py TM_LIVE=
export TM_ARGS TM_SOURCE TM_LINE TM_NAN_FUNC TM_NAN_FILE TM_LIVE
[ $have_emacs = 1 ] && run emacs-replay emacs_session
[ $have_vim = 1 ] && run vim-prompt-replay "$PYTHON" "$here/vim-run.py" prompt "$work/vp.out"
[ $have_vim = 1 ] && run vim-terminal-replay "$PYTHON" "$here/vim-run.py" terminal "$work/vt.out"

# the live program (a torch process per session)
if ldd "$lib" 2>/dev/null | grep -q 'libasan'; then
	TM_QUICK=1
fi
if [ -n "${TM_QUICK:-}" ]; then
	echo "SKIP live sessions: TM_QUICK (they run in the normal build)"
elif ! "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
	echo "SKIP live sessions: torch is not importable by $PYTHON"
else
	TENSORMORPH_LIB=$lib
	TENSORMORPH_PROBE_PATH=$top_srcdir/probes/pytorch
	export TENSORMORPH_LIB TENSORMORPH_PROBE_PATH
	# examples/train_diverge.py: MLP.forward holds line 18; the first NaN
	# is the output of model.layers.1.norm (torch's LayerNorm)
	TM_ARGS="--args $(command -v "$PYTHON") $top_srcdir/examples/train_diverge.py"
	TM_SOURCE=$top_srcdir/examples/train_diverge.py TM_LINE=18
	TM_NAN_FUNC=model.layers.1.norm TM_NAN_FILE=normalization.py TM_LIVE=1
	[ $have_emacs = 1 ] && run emacs-live emacs_session
	[ $have_vim = 1 ] && run vim-terminal-live "$PYTHON" "$here/vim-run.py" terminal "$work/vl.out"
fi
exit $fail
