// extension.js -- the tmdb debugger type: VS Code starts
// `tmdb --interpreter=dap` (the Debug Adapter Protocol on stdio, see
// doc/ide.md) for every tmdb session; tmdb does the rest.
'use strict';
const vscode = require('vscode');

function tmdbPath() {
	return vscode.workspace.getConfiguration('tmdb').get('path') || 'tmdb';
}

// F5 with no launch.json: debug the Python file in the editor, or replay
// the recording it is.
class ConfigurationProvider {
	resolveDebugConfiguration(folder, config) {
		if (!config.type && !config.request && !config.name) {
			const editor = vscode.window.activeTextEditor;
			const file = editor && editor.document.fileName;
			if (!file)
				return undefined;
			config.type = 'tmdb';
			config.request = 'launch';
			config.name = file.endsWith('.tmrun') ? 'tmdb: replay' : 'tmdb: debug';
			config.program = file;
			if (folder)
				config.cwd = folder.uri.fsPath;
		}
		if (config.request === 'launch' && !config.program) {
			return vscode.window.showErrorMessage('tmdb: "program" names the script or .tmrun to debug.')
				.then(() => undefined);
		}
		return config;
	}
}

class AdapterFactory {
	createDebugAdapterDescriptor() {
		return new vscode.DebugAdapterExecutable(tmdbPath(), ['--interpreter=dap']);
	}
}

function activate(context) {
	context.subscriptions.push(
		vscode.debug.registerDebugConfigurationProvider('tmdb', new ConfigurationProvider()),
		vscode.debug.registerDebugAdapterDescriptorFactory('tmdb', new AdapterFactory()));
}

function deactivate() {}

module.exports = { activate, deactivate };
