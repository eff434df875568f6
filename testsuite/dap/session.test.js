// session.test.js -- tmdb --interpreter=dap driven by VS Code's own test
// client (@vscode/debugadapter-testsupport's DebugClient), headless: the
// requests VS Code sends when a user sets breakpoints, looks at the stack,
// the Variables pane and a watch, steps back and disconnects.  Run by
// run-dap.sh (make check), which installs the client and records the
// example run; the environment names what to use:
//   TMDB   the tmdb binary          TRACE  a recording of train_diverge.py
//   TOP    the source tree          TENSORMORPH_LIB, TENSORMORPH_PROBE_PATH
'use strict';
const { test } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { DebugClient } = require('@vscode/debugadapter-testsupport');

const TMDB = process.env.TMDB;
const TRACE = process.env.TRACE;
const TOP = process.env.TOP;
const SCRIPT = path.join(TOP, 'examples', 'train_diverge.py');
const LIVE = process.env.DAP_LIVE !== '0';

function client() {
	const dc = new DebugClient(TMDB, '--interpreter=dap', 'tmdb', {}, true);
	dc.defaultTimeout = 60000;
	return dc;
}

// tmdb's exit status once the client disconnected: 0, also under the
// sanitizers (a leak or an error report makes it non-zero).
function exitCode(dc) {
	const p = dc._adapterProcess;
	return new Promise((resolve) => {
		if (p.exitCode !== null || p.signalCode !== null)
			resolve(p.exitCode);
		else
			p.on('exit', (code) => resolve(code));
	});
}

// Everything the client was told on the console, in order.
function collect(dc) {
	const out = [];
	dc.on('output', (e) => out.push(e.body));
	return out;
}

// The usual start: initialize, launch, (breakpoints), configurationDone,
// and the first stop.
async function start(dc, launchArgs, configure) {
	await dc.start();
	const init = await dc.initializeRequest();
	assert.ok(init.body.supportsStepBack, 'step back is offered');
	assert.ok(init.body.supportsConditionalBreakpoints);
	assert.ok(init.body.supportsFunctionBreakpoints);
	assert.ok(init.body.supportsLogPoints);
	const initialized = dc.waitForEvent('initialized');
	await dc.launchRequest(launchArgs);
	await initialized;
	if (configure)
		await configure();
	const stopped = dc.waitForEvent('stopped');
	await dc.configurationDoneRequest();
	return stopped;
}

async function scopeVars(dc, frameId) {
	const scopes = (await dc.scopesRequest({ frameId })).body.scopes;
	const out = {};
	for (const s of scopes)
		out[s.name] = (await dc.variablesRequest({ variablesReference: s.variablesReference })).body.variables;
	return out;
}

function byName(vars, name) {
	const v = vars.find((x) => x.name === name);
	assert.ok(v, `variable ${name} in ${JSON.stringify(vars.map((x) => x.name))}`);
	return v;
}

// The first NaN, as train_diverge.tmdb finds it: the CLI's answer.
async function firstNan(dc, stopped) {
	assert.strictEqual(stopped.body.reason, 'function breakpoint');
	assert.deepStrictEqual(stopped.body.hitBreakpointIds, [1]);
	assert.strictEqual(stopped.body.threadId, 1);
	const threads = (await dc.threadsRequest()).body.threads;
	assert.strictEqual(threads.length, 1);
	const frames = (await dc.stackTraceRequest({ threadId: 1 })).body.stackFrames;
	assert.match(frames[0].name, /^model\.layers\.1\.norm \(LayerNorm\) exit$/);
	// the module call stack, with the example's own source lines
	assert.deepStrictEqual(frames.slice(1).map((f) => [f.name, path.basename(f.source.path), f.line]),
		[['model.layers.1 (Block)', 'train_diverge.py', 27], ['model (Net)', 'train_diverge.py', 38]]);
	const vars = await scopeVars(dc, frames[0].id);
	const t = vars['Tensor (out)'];
	assert.ok(Number(byName(t, 'nan_count').value) > 0, 'the focus tensor holds NaNs');
	assert.strictEqual(byName(t, 'shape').value, '[64, 32]');
	assert.strictEqual(byName(t, 'nan_count').evaluateName, 'tensor.nan_count');
	// shape expands into its dimensions
	const dims = (await dc.variablesRequest({ variablesReference: byName(t, 'shape').variablesReference })).body.variables;
	assert.deepStrictEqual(dims.map((d) => d.value), ['64', '32']);
	// the call's output is a tensor that expands into its statistics
	const out = byName(vars.Outputs, 'out');
	assert.strictEqual(out.evaluateName, 'model.layers.1.norm:out');
	const fields = (await dc.variablesRequest({ variablesReference: out.variablesReference })).body.variables;
	assert.ok(Number(byName(fields, 'nan_count').value) > 0);
	// a watch (TQL) and a hover
	const w = await dc.evaluateRequest({ expression: 'tensor.nan_count > 0', context: 'watch', frameId: frames[0].id });
	assert.strictEqual(w.body.result, 'true');
	const h = await dc.evaluateRequest({ expression: 'tensor', context: 'hover', frameId: frames[0].id });
	assert.strictEqual(h.body.type, 'tensor');
	assert.ok(h.body.variablesReference > 0);
	const bad = await dc.evaluateRequest({ expression: 'tensor.nope', context: 'watch' }).catch((e) => e);
	assert.ok(bad instanceof Error, 'an unknown field is an error response');
	return frames;
}

test('replay: a conditional breakpoint stops at the first NaN; step back, reverse-continue', async () => {
	const dc = client();
	const out = collect(dc);
	try {
		const stopped = await start(dc, { program: TRACE }, async () => {
			const r = await dc.setFunctionBreakpointsRequest({ breakpoints: [
				{ name: 'model.**', condition: 'tensor.nan_count > 0' }] });
			assert.strictEqual(r.body.breakpoints[0].verified, true);
		});
		await firstNan(dc, stopped);
		// the debug console is tmdb's command line
		await dc.evaluateRequest({ expression: 'print tensor.nan_count > 0', context: 'repl' });
		assert.ok(out.some((o) => o.category === 'console' && /^\$1 = true/m.test(o.output)),
			JSON.stringify(out));
		// step back: the same call's entry
		let ev = dc.waitForEvent('stopped');
		await dc.stepBackRequest({ threadId: 1 });
		assert.strictEqual((await ev).body.reason, 'step');
		let frames = (await dc.stackTraceRequest({ threadId: 1 })).body.stackFrames;
		assert.strictEqual(frames[0].name, 'model.layers.1.norm (LayerNorm) enter');
		const inputs = (await scopeVars(dc, frames[0].id)).Inputs;
		assert.strictEqual(Number(byName((await dc.variablesRequest({
			variablesReference: byName(inputs, 'in').variablesReference })).body.variables,
			'nan_count').value), 0, 'what came in had no NaN');
		// reverse-continue: no NaN earlier, back to the start of the recording
		ev = dc.waitForEvent('stopped');
		await dc.reverseContinueRequest({ threadId: 1 });
		assert.strictEqual((await ev).body.reason, 'entry');
		// and forward to the same stop again
		ev = dc.waitForEvent('stopped');
		await dc.continueRequest({ threadId: 1 });
		assert.strictEqual((await ev).body.reason, 'function breakpoint');
		frames = (await dc.stackTraceRequest({ threadId: 1 })).body.stackFrames;
		assert.match(frames[0].name, /^model\.layers\.1\.norm /);
		await dc.disconnectRequest({});
		assert.strictEqual(await exitCode(dc), 0, 'tmdb exits 0');
	} finally {
		dc.stopAdapter();
	}
});

test('replay: a source line with a hit count, a log point, pause when stopped, goto', async () => {
	const dc = client();
	const out = collect(dc);
	try {
		const stopped = await start(dc, { program: TRACE }, async () => {
			const r = await dc.setBreakpointsRequest({ source: { path: SCRIPT }, breakpoints: [
				{ line: 19, hitCondition: '3' },                 // MLP.forward
				{ line: 27, logMessage: 'block mean {tensor.mean}' }, // Block.forward
				{ line: 2 }] });                                 // before any forward()
			assert.deepStrictEqual(r.body.breakpoints.map((b) => b.verified), [true, true, false]);
			assert.match(r.body.breakpoints[2].message, /No module's forward\(\)/);
		});
		assert.strictEqual(stopped.body.reason, 'breakpoint');
		const frames = (await dc.stackTraceRequest({ threadId: 1 })).body.stackFrames;
		assert.strictEqual(frames[0].name, 'model.layers.2.mlp (MLP) exit');
		assert.strictEqual(frames[0].line, 17);
		const logs = out.filter((o) => /^block mean /.test(o.output));
		assert.strictEqual(logs.length, 2, 'layers 0 and 1 logged before the third MLP');
		assert.match(logs[0].output, /^block mean -?\d/);
		let ev = dc.waitForEvent('stopped');
		await dc.pauseRequest({ threadId: 1 });
		assert.strictEqual((await ev).body.reason, 'pause');
		// Jump to Cursor on Block.forward: the next call of a Block
		const targets = (await dc.gotoTargetsRequest({ source: { path: SCRIPT }, line: 28 })).body.targets;
		assert.strictEqual(targets[0].label, 'next call of model.layers.*');
		ev = dc.waitForEvent('stopped');
		await dc.gotoRequest({ threadId: 1, targetId: targets[0].id });
		assert.strictEqual((await ev).body.reason, 'goto');
		const at = (await dc.stackTraceRequest({ threadId: 1 })).body.stackFrames[0];
		assert.strictEqual(at.name, 'model.layers.2 (Block) exit');
		await dc.disconnectRequest({});
		assert.strictEqual(await exitCode(dc), 0, 'tmdb exits 0');
	} finally {
		dc.stopAdapter();
	}
});

test('live: examples/train_diverge.py stops at the first NaN; step back; disconnect kills it', { skip: !LIVE && 'DAP_LIVE=0' }, async () => {
	const dc = client();
	const out = collect(dc);
	let pid = 0;
	dc.on('process', (e) => { pid = e.body.systemProcessId; });
	try {
		const stopped = await start(dc, { program: SCRIPT, cwd: TOP, env: {
			TENSORMORPH_LIB: process.env.TENSORMORPH_LIB,
			TENSORMORPH_PROBE_PATH: process.env.TENSORMORPH_PROBE_PATH } }, async () => {
			const r = await dc.setFunctionBreakpointsRequest({ breakpoints: [
				{ name: 'model.**', condition: 'tensor.nan_count > 0' }] });
			// no module is known before the program starts: pending
			assert.strictEqual(r.body.breakpoints[0].verified, false);
		});
		await firstNan(dc, stopped);
		assert.ok(pid > 0, 'a process event named the program');
		// the program's own output arrived as output events
		const printed = out.filter((o) => o.category === 'stdout').map((o) => o.output).join('');
		assert.match(printed, /step  2  loss /);
		const ev = dc.waitForEvent('stopped');
		await dc.stepBackRequest({ threadId: 1 });
		assert.strictEqual((await ev).body.reason, 'step');
		const frames = (await dc.stackTraceRequest({ threadId: 1 })).body.stackFrames;
		assert.strictEqual(frames[0].name, 'model.layers.1.norm (LayerNorm) enter');
		await dc.disconnectRequest({});
		assert.strictEqual(await exitCode(dc), 0, 'tmdb exits 0');
		// the program tmdb started is gone with the session
		await new Promise((r) => setTimeout(r, 500));
		assert.throws(() => process.kill(pid, 0), 'the program was killed');
	} finally {
		dc.stopAdapter();
	}
});

test('live: pause while the model runs, continue to its end: exited, terminated', { skip: !LIVE && 'DAP_LIVE=0' }, async () => {
	const dc = client();
	const out = collect(dc);
	try {
		await dc.start();
		await dc.initializeRequest();
		const init = dc.waitForEvent('initialized');
		await dc.launchRequest({ program: SCRIPT, cwd: TOP, env: {
			TENSORMORPH_LIB: process.env.TENSORMORPH_LIB,
			TENSORMORPH_PROBE_PATH: process.env.TENSORMORPH_PROBE_PATH } });
		await init;
		const proc = dc.waitForEvent('process');
		await dc.configurationDoneRequest();
		await proc;
		// no breakpoint: the model runs until paused
		const paused = dc.waitForEvent('stopped');
		await dc.pauseRequest({ threadId: 1 });
		assert.strictEqual((await paused).body.reason, 'pause');
		const frames = (await dc.stackTraceRequest({ threadId: 1 })).body.stackFrames;
		assert.match(frames[0].name, /^model/);
		const exited = dc.waitForEvent('exited');
		const terminated = dc.waitForEvent('terminated');
		await dc.continueRequest({ threadId: 1 });
		assert.strictEqual((await exited).body.exitCode, 0);
		await terminated;
		assert.match(out.filter((o) => o.category === 'stdout').map((o) => o.output).join(''),
			/step  7  loss nan/);
		await dc.disconnectRequest({});
		assert.strictEqual(await exitCode(dc), 0, 'tmdb exits 0');
	} finally {
		dc.stopAdapter();
	}
});

test('bad input: an error response, and the session goes on', async () => {
	const dc = client();
	try {
		await dc.start();
		await dc.initializeRequest();
		const r = await dc.launchRequest({ program: '/nonexistent/run.tmrun' }).catch((e) => e);
		assert.ok(r instanceof Error);
		assert.match(r.message, /nonexistent/);
		const u = await dc.customRequest('noSuchRequest').catch((e) => e);
		assert.match(u.message, /Unrecognized request/);
		await dc.launchRequest({ program: TRACE });
		const s = dc.waitForEvent('stopped');
		await dc.configurationDoneRequest();
		assert.strictEqual((await s).body.reason, 'end');
		await dc.disconnectRequest({});
		assert.strictEqual(await exitCode(dc), 0, 'tmdb exits 0');
	} finally {
		dc.stopAdapter();
	}
});
