// The compiled CLI as people run it (`node bin/ferry.js`, dist/ from `npm run build`, which `npm test` runs first):
// --version and --help answer, and load nothing from node_modules (no Temporal client, no zod, no YAML) to do it;
// a command's packages go through Node's compile cache, in the user's cache directory.
// How fast they start is bench/cli-start.sh's business, not a test's.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAIN_HELP, COMMAND_HELP } from '../../client/cli/help.js';
import { repoRoot } from '../support/local-env.js';

const built = existsSync(join(repoRoot, 'dist/client/cli.js'));
const { version } = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string };

// Fails the run when anything under node_modules/ loads as a module.
const NO_PACKAGES = `data:text/javascript,${encodeURIComponent(`
import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(
  'export async function load(url, context, next) {' +
  '  if (url.includes("/node_modules/")) throw new Error("ferry loaded " + url);' +
  '  return next(url, context);' +
  '}'));
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
    expect(stderr).toMatch(/ferry loaded file:\/\/.*\/node_modules\//);
    // `ferry delete --cluster` loads the prelude first, to send its update before the SDK loads; YAML is the first
    // package it needs.
    const prelude = ferry('delete', 'qwen', '--cluster', 'c', '--temporal-address', '127.0.0.1:9');
    expect(prelude.stderr).toMatch(/ferry loaded file:\/\/.*\/node_modules\//);
  });

  it("compiles a command's modules into Node's compile cache in the user's cache directory, theirs alone", () => {
    const cache = mkdtempSync(join(tmpdir(), 'ferry-cache-'));
    try {
      const run = () =>
        spawnSync(process.execPath, ['bin/ferry.js', 'status', 'qwen', '--temporal-address', '127.0.0.1:9'], {
          cwd: repoRoot,
          env: { ...process.env, XDG_CACHE_HOME: cache, NODE_COMPILE_CACHE: undefined },
          encoding: 'utf8',
          timeout: 20_000,
        });
      expect(run().status).toBe(5);
      const files = (dir: string): string[] =>
        readdirSync(dir, { withFileTypes: true, recursive: true })
          .filter((entry) => entry.isFile())
          .map((entry) => join(entry.parentPath, entry.name));
      const cached = files(join(cache, 'ferry', 'node'));
      // Several hundred modules: zod, YAML, the Temporal client, gRPC, protobuf.
      expect(cached.length).toBeGreaterThan(0);
      expect(statSync(join(cache, 'ferry', 'node')).mode & 0o777).toBe(0o700);
      expect(run().status).toBe(5);
    } finally {
      rmSync(cache, { recursive: true, force: true });
    }
  }, 60_000);

  it('ends quietly with 141 when what it prints is no longer read, as `| head` does to it', async () => {
    // A command's output to a pipe whose reader has already gone: the first write fails with EPIPE.
    const child = spawn(process.execPath, ['bin/ferry.js', 'explain', 'spec'], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(stderr).toBe('');
    expect(code).toBe(141);
  });
});
