#!/bin/sh
# run-live.sh -- make check driver for live debugging of real PyTorch
# programs (test_live.py): tmdb launching and attaching to them, the same
# command file live and over the recording, and the failure tests.
srcdir=${srcdir:-$(dirname "$0")/..}
TM_PYTEST_FILES=test_live.py
export TM_PYTEST_FILES
exec "$srcdir/probes/run-pytest.sh" "$@"
