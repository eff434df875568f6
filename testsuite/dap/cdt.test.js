// cdt.test.js -- tmdb's GDB/MI driven by Eclipse CDT's debug adapter
// (cdt-gdb-adapter, what cdt-gdb-vscode runs), with its default launch
// configuration and "gdb": tmdb: the MI sequence it sends at start-up
// (-gdb-show host-charset, -target-select native, ...), a conditional
// source-line breakpoint at the first NaN on the recording and on the live
// program (set before it starts: pending), the stack, the Variables pane (-stack-list-variables names
// handed back to -var-create), a watch, and disconnect.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { DebugClient } = require('@vscode/debugadapter-testsupport');

const TMDB = process.env.TMDB;
const TOP = process.env.TOP;
const SCRIPT = path.join(TOP, 'examples', 'train_diverge.py');
const ADAPTER = require.resolve('cdt-gdb-adapter/dist/debugAdapter.js');
const LIVE = process.env.DAP_LIVE !== '0';

function client() {
	const dc = new DebugClient(process.execPath, ADAPTER, 'gdb');
	dc.defaultTimeout = 60000;
	return dc;
}

async function firstNanAt(dc, line) {
	const f = (await dc.stackTraceRequest({ threadId: 1 })).body.stackFrames;
	assert.strictEqual(path.basename(f[0].source.path), 'train_diverge.py');
	assert.strictEqual(f[0].line, line);
	assert.deepStrictEqual(f.slice(1).map((x) => [x.name, x.line]), [['model.layers.1', 27], ['model', 38]]);
	const scopes = (await dc.scopesRequest({ frameId: f[0].id })).body.scopes;
	const vars = (await dc.variablesRequest({ variablesReference: scopes[0].variablesReference })).body.variables;
	const nan = vars.find((v) => v.name === 'nan_count');
	assert.ok(nan && Number(nan.value) > 0, JSON.stringify(vars));
	assert.ok(vars.find((v) => v.name === 'inf_count'), JSON.stringify(vars));
	const w = await dc.evaluateRequest({ expression: 'tensor.nan_count > 0', context: 'watch', frameId: f[0].id });
	assert.strictEqual(w.body.result, 'true');
	return f;
}

test('cdt-gdb-adapter, default launch, replay: a conditional line breakpoint stops at the first NaN', async () => {
	const dc = client();
	try {
		await dc.start();
		await dc.initializeRequest();
		const init = dc.waitForEvent('initialized');
		const launched = dc.launchRequest({ gdb: TMDB, program: process.env.TRACE });
		await init;
		const bp = await dc.setBreakpointsRequest({ source: { path: SCRIPT },
			breakpoints: [{ line: 19, condition: 'tensor.nan_count > 0' }] });
		assert.strictEqual(bp.body.breakpoints[0].verified, true);
		const stopped = dc.waitForEvent('stopped');
		await dc.configurationDoneRequest();
		await launched;
		// cdt reports the stop only once tmdb has announced the thread
		assert.strictEqual((await stopped).body.reason, 'breakpoint');
		await firstNanAt(dc, 17);
		await dc.disconnectRequest({});
	} finally {
		dc.stopAdapter();
	}
});

test('cdt-gdb-adapter, default launch, live: the first NaN of examples/train_diverge.py', { skip: !LIVE && 'DAP_LIVE=0' }, async () => {
	const dc = client();
	try {
		await dc.start();
		await dc.initializeRequest();
		const init = dc.waitForEvent('initialized');
		const launched = dc.launchRequest({ gdb: TMDB, program: process.env.PYTHON_PATH, arguments: SCRIPT });
		await init;
		// no module is known before the program runs: the line breakpoint
		// is pending (-break-insert -f FILE:LINE) until MLP.forward's
		// modules are called; first a stop at the first call
		const bp = await dc.setBreakpointsRequest({ source: { path: SCRIPT },
			breakpoints: [{ line: 19, condition: 'tensor.nan_count > 0' }] });
		assert.ok(!bp.body.breakpoints[0].message, JSON.stringify(bp.body));
		await dc.setFunctionBreakpointsRequest({ breakpoints: [{ name: 'model.embed' }] });
		let stopped = dc.waitForEvent('stopped');
		await dc.configurationDoneRequest();
		await launched;
		assert.strictEqual((await stopped).body.reason, 'function breakpoint');
		// every field -stack-list-variables names evaluates (l2 too)
		const f = (await dc.stackTraceRequest({ threadId: 1 })).body.stackFrames;
		assert.strictEqual(f[0].name, 'model.embed');
		const scopes = (await dc.scopesRequest({ frameId: f[0].id })).body.scopes;
		const vars = (await dc.variablesRequest({ variablesReference: scopes[0].variablesReference })).body.variables;
		assert.ok(Number(vars.find((v) => v.name === 'l2').value) > 0, JSON.stringify(vars));
		await dc.setFunctionBreakpointsRequest({ breakpoints: [] });
		stopped = dc.waitForEvent('stopped');
		await dc.continueRequest({ threadId: 1 });
		assert.strictEqual((await stopped).body.reason, 'breakpoint');
		await firstNanAt(dc, 17);
		await dc.disconnectRequest({});
	} finally {
		dc.stopAdapter();
	}
});
