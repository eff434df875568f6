#!/bin/sh
# package.sh -- build tmdb.vsix from this directory with npm's own tools:
# npm ci installs the pinned @vscode/vsce (package-lock.json), vsce
# packages.  The .vsix is a build artifact (not committed).
set -eu
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --loglevel=error
npx --no-install vsce package --no-dependencies --skip-license \
	--allow-missing-repository -o "${1:-tmdb.vsix}"
