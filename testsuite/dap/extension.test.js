// extension.test.js -- editors/vscode: the extension starts
// `tmdb --interpreter=dap`, and its launch configurations are ones tmdb
// accepts (each is sent to tmdb as VS Code would, variables filled in).
'use strict';
const { test } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const Module = require('node:module');
const { DebugClient } = require('@vscode/debugadapter-testsupport');

const TOP = process.env.TOP;
const ext = path.join(TOP, 'editors', 'vscode');
const pkg = require(path.join(ext, 'package.json'));

// The vscode module as far as extension.js uses it.
function fakeVscode(registered, settings) {
	return {
		workspace: { getConfiguration: () => ({ get: (k) => settings[k] }) },
		window: { activeTextEditor: { document: { fileName: '/w/train.py' } },
			showErrorMessage: async () => undefined },
		debug: {
			registerDebugConfigurationProvider: (t, p) => { registered.provider = [t, p]; return {}; },
			registerDebugAdapterDescriptorFactory: (t, f) => { registered.factory = [t, f]; return {}; },
		},
		DebugAdapterExecutable: class { constructor(command, args) { this.command = command; this.args = args; } },
	};
}

function loadExtension(registered, settings) {
	const orig = Module._load;
	Module._load = function (req, ...rest) {
		return req === 'vscode' ? fakeVscode(registered, settings) : orig.call(this, req, ...rest);
	};
	try {
		delete require.cache[require.resolve(path.join(ext, 'extension.js'))];
		const e = require(path.join(ext, 'extension.js'));
		e.activate({ subscriptions: [] });
	} finally {
		Module._load = orig;
	}
}

test('the debugger type starts tmdb --interpreter=dap', () => {
	const registered = {};
	loadExtension(registered, { path: '/opt/tmdb/bin/tmdb' });
	assert.strictEqual(registered.factory[0], 'tmdb');
	const d = registered.factory[1].createDebugAdapterDescriptor({});
	assert.strictEqual(d.command, '/opt/tmdb/bin/tmdb');
	assert.deepStrictEqual(d.args, ['--interpreter=dap']);
	// F5 without launch.json debugs the file in the editor
	const c = registered.provider[1].resolveDebugConfiguration(undefined, {});
	assert.deepStrictEqual([c.type, c.request, c.program], ['tmdb', 'launch', '/w/train.py']);
});

test('package.json: one tmdb debugger, the three launch configurations', () => {
	const dbg = pkg.contributes.debuggers;
	assert.strictEqual(dbg.length, 1);
	assert.strictEqual(dbg[0].type, 'tmdb');
	assert.deepStrictEqual(dbg[0].initialConfigurations.map((c) => c.name), [
		'tmdb: debug a training script', 'tmdb: replay a .tmrun', 'tmdb: attach to a process']);
	assert.ok(pkg.devDependencies['@vscode/vsce'], 'packaged with vsce');
});

test('the replay configuration, as VS Code fills it in, replays in tmdb', async () => {
	const conf = { ...pkg.contributes.debuggers[0].initialConfigurations[1], program: process.env.TRACE };
	const launch = pkg.contributes.debuggers[0].configurationAttributes.launch.properties;
	for (const k of Object.keys(conf))
		assert.ok(['type', 'request', 'name'].includes(k) || launch[k], `${k} is a launch attribute`);
	const dc = new DebugClient(process.env.TMDB, '--interpreter=dap', 'tmdb');
	dc.defaultTimeout = 60000;
	try {
		await dc.start();
		await dc.initializeRequest();
		await dc.launchRequest(conf);
		await dc.setFunctionBreakpointsRequest({ breakpoints: [{ name: 'model.head' }] });
		const s = dc.waitForEvent('stopped');
		await dc.configurationDoneRequest();
		assert.strictEqual((await s).body.reason, 'function breakpoint');
		await dc.disconnectRequest({});
	} finally {
		dc.stopAdapter();
	}
});
