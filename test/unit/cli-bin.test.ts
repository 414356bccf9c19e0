// The compiled CLI as people run it (`node bin/ferry.js`, dist/ from `npm run build`, which `npm test` runs first):
// --version and --help answer, and load nothing from node_modules (no Temporal client, no zod, no YAML), nor the
// bundle of them that the build writes, to do it.
// How fast they start is bench/cli-start.sh's business, not a test's.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAIN_HELP, COMMAND_HELP } from '../../client/cli/help.js';
import { BUNDLE_FILE, PRELUDE_FILE } from '../../client/cli/load-commands.js';
import { repoRoot } from '../support/local-env.js';

const built = existsSync(join(repoRoot, 'dist/client/cli.js'));
const { version } = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string };

// Fails the run when anything under node_modules/ loads as a module, or when the CLI reads the build's bundles of
// its commands or of their prelude (client/cli/load-commands.ts), which hold the same packages.
const NO_PACKAGES = `data:text/javascript,${encodeURIComponent(`
import { register, syncBuiltinESMExports } from 'node:module';
import fs from 'node:fs';
register('data:text/javascript,' + encodeURIComponent(
  'export async function load(url, context, next) {' +
  '  if (url.includes("/node_modules/")) throw new Error("ferry loaded " + url);' +
  '  return next(url, context);' +
  '}'));
const readFileSync = fs.readFileSync;
fs.readFileSync = function (path, ...rest) {
  if (String(path).endsWith('${BUNDLE_FILE}') || String(path).endsWith('${PRELUDE_FILE}')) {
    throw new Error('ferry loaded ' + path);
  }
  return readFileSync.call(this, path, ...rest);
};
syncBuiltinESMExports();
`)}`;

function ferry(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  return ferryWith({}, ...args);
}

function ferryWith(
  env: NodeJS.ProcessEnv,
  ...args: string[]
): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, ['--import', NO_PACKAGES, 'bin/ferry.js', ...args], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe.skipIf(!built)('bin/ferry.js (compiled)', () => {
  it('prints `ferry <version>` from package.json and exits 0, with -V too', () => {
    expect(ferry('--version')).toEqual({ status: 0, stdout: `ferry ${version}\n`, stderr: '' });
    expect(ferry('-V')).toEqual({ status: 0, stdout: `ferry ${version}\n`, stderr: '' });
  });

  it('prints the help and exits 0, for the tool and for a command', () => {
    expect(ferry('--help')).toEqual({ status: 0, stdout: MAIN_HELP, stderr: '' });
    expect(ferry('serve', '--help')).toEqual({ status: 0, stdout: COMMAND_HELP.serve, stderr: '' });
    expect(ferry('help', 'watch')).toEqual({ status: 0, stdout: COMMAND_HELP.watch, stderr: '' });
  });

  it('still exits 2 with the usage on a bad command line', () => {
    const { status, stdout, stderr } = ferry('--bogus');
    expect({ status, stdout }).toEqual({ status: 2, stdout: '' });
    expect(stderr).toMatch(/^error: a command comes first .*got --bogus\n\nferry: serve LLMs/);
  });

  it('fails, in this harness, as soon as a command loads its packages (the hook works)', () => {
    const { status, stderr } = ferry('status', 'qwen', '--temporal-address', '127.0.0.1:9');
    expect(status).not.toBe(0);
    // The build's bundle when it is there (`npm run build`), else the packages themselves.
    expect(stderr).toMatch(
      existsSync(join(repoRoot, 'dist/client/cli', BUNDLE_FILE))
        ? /ferry loaded \/.*\/dist\/client\/cli\/run\.bundle\.cjs/
        : /ferry loaded file:\/\/.*\/node_modules\//,
    );
    // `ferry delete --cluster` loads the prelude first, to send its update before the commands load.
    if (existsSync(join(repoRoot, 'dist/client/cli', PRELUDE_FILE))) {
      const prelude = ferry('delete', 'qwen', '--cluster', 'c', '--temporal-address', '127.0.0.1:9');
      expect(prelude.stderr).toMatch(/ferry loaded \/.*\/dist\/client\/cli\/prepare\.bundle\.cjs/);
    }
    // FERRY_CLI_BUNDLE=0 loads the modules themselves.
    const modules = ferryWith({ FERRY_CLI_BUNDLE: '0' }, 'status', 'qwen', '--temporal-address', '127.0.0.1:9');
    expect(modules.stderr).toMatch(/ferry loaded file:\/\/.*\/node_modules\//);
  });
});
