#!/bin/sh
# run-dap.sh -- make check driver for tmdb in VS Code: its test client
# (@vscode/debugadapter-testsupport, pinned by package.json and
# package-lock.json here) drives headless sessions of tmdb
# --interpreter=dap (session.test.js, extension.test.js) and of Eclipse
# CDT's adapter running tmdb as its gdb (cdt-gdb-adapter, cdt.test.js), on a
# recording of examples/train_diverge.py and on the live program.
#
# The client is installed with `npm ci` into the build tree (dap.work/node),
# never into the sources; without node, npm or a registry to install from
# the test is skipped (77) with the reason.  The recording is made here,
# by tmdb running the example with the probe (TENSORMORPH_RECORD), so it
# needs torch.  A sanitizer build and distcheck (TM_QUICK=1) run the
# replay sessions only.
srcdir=${srcdir:-$(dirname "$0")/..}
top_srcdir=$(cd "$srcdir/.." && pwd)
here=$(cd "$srcdir/dap" && pwd)
PYTHON=${PYTHON:-python3}
build=$(pwd)
lib=${TENSORMORPH_LIB:-$build/../src/lib/.libs/libtensormorph.so}
TMDB=${TMDB:-$build/../src/tmdb/tmdb}

for tool in node npm; do
	if ! command -v $tool >/dev/null 2>&1; then
		echo "SKIP: $tool is not installed (apt-get install nodejs npm)"
		exit 77
	fi
done
if ! "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
	echo "SKIP: torch is not importable by $PYTHON (pip install torch==2.13.0)"
	exit 77
fi

# the client, once per lock file
node_dir=$build/dap.work/node
mkdir -p "$node_dir"
if ! cmp -s "$here/package-lock.json" "$node_dir/package-lock.json" ||
   [ ! -d "$node_dir/node_modules/@vscode/debugadapter-testsupport" ]; then
	cp "$here/package.json" "$here/package-lock.json" "$node_dir/" && chmod u+w "$node_dir"/package*.json
	if ! (cd "$node_dir" && timeout 300 npm ci --no-audit --no-fund --loglevel=error) \
		>"$build/dap.work/npm.log" 2>&1; then
		echo "SKIP: npm ci could not install the DAP test client (no registry?):"
		tail -n 5 "$build/dap.work/npm.log"
		rm -f "$node_dir/package-lock.json"
		exit 77
	fi
fi

# A sanitizer build's library loads into python only with its runtimes
# preloaded (as probes/run-pytest.sh does); then the live session is left
# to the normal build.
preload=
if ldd "$lib" 2>/dev/null | grep -q 'libasan'; then
	preload=$(ldd "$lib" | awk '/lib(asan|ubsan)\.so/ { print $3 }' | tr '\n' ':' | sed 's/:$//')
	TM_QUICK=1
fi
[ -n "${TM_QUICK:-}" ] && DAP_LIVE=0 && export DAP_LIVE

TENSORMORPH_LIB=$lib
TENSORMORPH_PROBE_PATH=$top_srcdir/probes/pytorch
export TENSORMORPH_LIB TENSORMORPH_PROBE_PATH
trace=$build/dap.work/train_diverge.tmrun
rm -f "$trace"
if ! (cd "$top_srcdir" && LD_PRELOAD=$preload${LD_PRELOAD:+:$LD_PRELOAD} \
	ASAN_OPTIONS=detect_leaks=0 TENSORMORPH_RECORD=$trace \
	"$TMDB" -batch -nx -ex run --args "$PYTHON" examples/train_diverge.py) \
	>"$build/dap.work/record.log" 2>&1 || [ ! -s "$trace" ]; then
	echo "FAIL: recording examples/train_diverge.py failed:"
	tail -n 20 "$build/dap.work/record.log"
	exit 1
fi

TMDB=$(cd "$(dirname "$TMDB")" && pwd)/$(basename "$TMDB")
TRACE=$trace
TOP=$top_srcdir
NODE_PATH=$node_dir/node_modules
export TMDB TRACE TOP NODE_PATH
PYTHON_PATH=$(command -v "$PYTHON")
export PYTHON_PATH
exec node --test --test-reporter=tap "$here/session.test.js" "$here/extension.test.js" \
	"$here/cdt.test.js"
