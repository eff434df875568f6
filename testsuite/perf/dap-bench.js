// dap-bench.js -- tmdb --interpreter=dap latencies, printed (never a test):
//   stop:      a `continue` request to the `stopped` event, with a breakpoint
//              on every layer (model.layers.*: the next module call stops),
//              on a recording and on the live program; an upper bound of
//              "breakpoint event in the model -> stopped" (it includes the
//              model running up to that call);
//   variables: the Variables pane of the call of a 100-submodule model
//              (testsuite/perf/dap_wide.py at probe level 2: 200 parameters,
//              their gradients) -- the scopes request and each scope's
//              variables request.
// Run from the top of the tree after `make check TESTS=dap/run-dap.sh`
// installed the client:
//   NODE_PATH=_build/testsuite/dap.work/node/node_modules \
//     node testsuite/perf/dap-bench.js [N]
// TMDB (default _build/src/tmdb/tmdb), TENSORMORPH_LIB and PYTHON may be set.
'use strict';
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const { execFileSync } = require('node:child_process');
const { DebugClient } = require('@vscode/debugadapter-testsupport');

const TOP = path.resolve(__dirname, '..', '..');
const TMDB = process.env.TMDB || path.join(TOP, '_build/src/tmdb/tmdb');
const LIB = process.env.TENSORMORPH_LIB || path.join(TOP, '_build/src/lib/.libs/libtensormorph.so');
const PROBE = path.join(TOP, 'probes/pytorch');
const PYTHON = process.env.PYTHON || 'python3';
const WIDE = path.join(TOP, 'testsuite/perf/dap_wide.py');
const N = Number(process.argv[2] || 50);
const env = { TENSORMORPH_LIB: LIB, TENSORMORPH_PROBE_PATH: PROBE, TENSORMORPH_LEVEL: '2' };

function stats(name, xs) {
	xs.sort((a, b) => a - b);
	const q = (p) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))];
	console.log(`${name.padEnd(34)} n=${xs.length}  min ${xs[0].toFixed(2)}  median ${q(0.5).toFixed(2)}  ` +
		`p90 ${q(0.9).toFixed(2)}  max ${xs[xs.length - 1].toFixed(2)} ms`);
}

async function session(launchArgs, bp, body) {
	const dc = new DebugClient(TMDB, '--interpreter=dap', 'tmdb');
	dc.defaultTimeout = 120000;
	await dc.start();
	await dc.initializeRequest();
	const init = dc.waitForEvent('initialized');
	await dc.launchRequest(launchArgs);
	await init;
	await dc.setFunctionBreakpointsRequest({ breakpoints: [typeof bp === 'string' ? { name: bp } : bp] });
	const first = dc.waitForEvent('stopped');
	await dc.configurationDoneRequest();
	await first;
	try {
		await body(dc);
	} finally {
		await dc.disconnectRequest({}).catch(() => {});
		dc.stopAdapter();
	}
}

async function stops(dc, n) {
	const xs = [];
	for (let i = 0; i < n; i++) {
		const ev = dc.waitForEvent('stopped');
		const t0 = process.hrtime.bigint();
		await dc.continueRequest({ threadId: 1 });
		const e = await ev;
		xs.push(Number(process.hrtime.bigint() - t0) / 1e6);
		if (e.body.reason !== 'function breakpoint')
			break;
	}
	return xs;
}

async function variables(dc, n) {
	const sc = [], vs = {};
	for (let i = 0; i < n; i++) {
		let t0 = process.hrtime.bigint();
		const scopes = (await dc.scopesRequest({ frameId: 1 })).body.scopes;
		sc.push(Number(process.hrtime.bigint() - t0) / 1e6);
		for (const s of scopes) {
			t0 = process.hrtime.bigint();
			const v = (await dc.variablesRequest({ variablesReference: s.variablesReference })).body.variables;
			(vs[`${s.name} (${v.length} vars)`] ||= []).push(Number(process.hrtime.bigint() - t0) / 1e6);
		}
	}
	stats('scopes', sc);
	for (const k of Object.keys(vs))
		stats(`variables: ${k}`, vs[k]);
}

(async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dap-bench-'));
	const trace = path.join(dir, 'wide.tmrun');
	execFileSync(TMDB, ['-batch', '-nx', '-ex', 'run', '--args', PYTHON, WIDE],
		{ env: { ...process.env, ...env, TENSORMORPH_RECORD: trace }, stdio: 'ignore' });
	console.log(`tmdb ${TMDB}\nmodel ${WIDE} (100 Linear layers, probe level 2)`);
	await session({ program: trace }, 'model.layers.*', async (dc) => stats('replay: continue -> stopped', await stops(dc, N)));
	await session({ program: WIDE, python: PYTHON, level: 2, env }, 'model.layers.*',
		async (dc) => stats('live: continue -> stopped', await stops(dc, N)));
	// lockstep: the model does not run ahead, each stop waits on the model
	await session({ program: WIDE, python: PYTHON, level: 2, env }, 'model.layers.*', async (dc) => {
		await dc.evaluateRequest({ expression: 'set lockstep on', context: 'repl' });
		stats('live lockstep: continue -> stopped', await stops(dc, N));
	});
	// the second call of the model: its parameters and gradients are recorded
	const second = { name: 'model', hitCondition: '2' };
	console.log('replay, the model\'s second call:');
	await session({ program: trace }, second, async (dc) => variables(dc, 20));
	console.log('live, the model\'s second call:');
	await session({ program: WIDE, python: PYTHON, level: 2, env }, second, async (dc) => variables(dc, 20));
	fs.rmSync(dir, { recursive: true, force: true });
})().catch((e) => { console.error(e); process.exit(1); });
