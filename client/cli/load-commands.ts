// Loads the commands that talk to Temporal (`run.ts` and everything under it: zod, YAML, the Temporal client, gRPC,
// protobuf) as fast as Node 20 allows, because every command pays this before its first request leaves (except the
// update of `ferry update` and `ferry delete`, which the smaller prelude, `prepare.ts`, sends before). `npm run
// build` writes each as one CommonJS file next to `run.js` (deploy/build/bundle-cli.mjs): one file instead of
// several hundred modules to resolve. That file is compiled with a V8 code cache kept in the user's
// cache directory, so a run after the first parses and compiles almost nothing (Node 20 has no compile cache of
// its own; `module.enableCompileCache` came in Node 22). Measured: docs/performance.md#update-and-delete-from-the-cli.
//
// Without the bundle (running from the TypeScript sources, or a build by `tsc` alone) the modules load as usual.
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import Module, { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Script } from 'node:vm';
import type { Env } from '../temporal-env.js';
import type * as Prepare from './prepare.js';
import type * as Run from './run.js';

type Commands = typeof Run;
type Prelude = typeof Prepare;

/** The commands' bundle's file name, next to `run.js` in dist/client/cli/. */
export const BUNDLE_FILE = 'run.bundle.cjs';
/**
 * The prelude's bundle (`prepare.js`: the settings, the document, the update sent without the SDK), next to it: what
 * `ferry update` and `ferry delete` load before the commands' bundle, so that their update leaves sooner.
 */
export const PRELUDE_FILE = 'prepare.bundle.cjs';

/**
 * Loads `run.js`'s exports: from the bundle when there is a current one, else from the modules themselves, as also
 * with `FERRY_CLI_BUNDLE=0` (stack traces then name the modules; `npm run bench:cli` compares the two).
 */
export async function loadCommands(env: Env): Promise<Commands> {
  return loadFrom<Commands>(env, BUNDLE_FILE, () => import('./run.js'));
}

/** Loads `prepare.js`'s exports, as `loadCommands` loads `run.js`'s. */
export async function loadPrelude(env: Env): Promise<Prelude> {
  return loadFrom<Prelude>(env, PRELUDE_FILE, () => import('./prepare.js'));
}

async function loadFrom<T extends object>(env: Env, file: string, modules: () => Promise<T>): Promise<T> {
  const bundle = fileURLToPath(new URL(`./${file}`, import.meta.url));
  if (env.FERRY_CLI_BUNDLE === '0' || !current(bundle)) return modules();
  const loaded = loadBundle<T>(bundle, codeCacheDir(env));
  // At exit, so the cache also holds the functions this command compiled on its way, not only the top level.
  if (loaded.cache === 'none' || loaded.cache === 'rejected') process.once('exit', loaded.saveCache);
  return loaded.exports;
}

/**
 * Whether the bundle exists and is not older than the last `tsc` build beside it (`dist/build.tsbuildinfo`, which
 * the published package does not have): a `tsc` run after `npm run build` makes the modules newer than the bundle.
 */
function current(bundle: string): boolean {
  let built: number;
  try {
    built = statSync(bundle).mtimeMs;
  } catch {
    return false;
  }
  const buildInfo = join(dirname(bundle), '..', '..', 'build.tsbuildinfo');
  try {
    return statSync(buildInfo).mtimeMs <= built;
  } catch {
    return true;
  }
}

/** `$XDG_CACHE_HOME/ferry/cli`, else `~/.cache/ferry/cli`; undefined (no cache) when neither can be named. */
export function codeCacheDir(env: Env): string | undefined {
  const base = env.XDG_CACHE_HOME || env.HOME || safeHomedir();
  if (!base) return undefined;
  return join(base, ...(env.XDG_CACHE_HOME ? [] : ['.cache']), 'ferry', 'cli');
}

function safeHomedir(): string | undefined {
  try {
    return homedir() || undefined;
  } catch {
    return undefined;
  }
}

export interface LoadedBundle<T extends object> {
  exports: T;
  /** `used`: compiled from the cache; `none`: there was none; `rejected`: V8 refused it; `off`: no cache dir. */
  cache: 'used' | 'none' | 'rejected' | 'off';
  /** Writes the cache of what has been compiled so far (best effort: a failure means the next run compiles). */
  saveCache: () => void;
}

/**
 * Runs a CommonJS file the way Node's loader does (the same wrapper, its own `require`), compiled with the V8 code
 * cache kept for it in `cacheDir`, named by the file's content and Node's version: another build or another Node
 * gets a cache of its own, and V8 compiles from source when it refuses one (another V8 version or flags). The
 * directory is made the user's own (0700): whoever loads compiled code trusts it.
 */
export function loadBundle<T extends object>(bundle: string, cacheDir: string | undefined): LoadedBundle<T> {
  const bytes = readFileSync(bundle);
  // By content: an upgrade in place can leave a file of the same size and time (npm packs every file with one
  // date), and V8 itself checks little more than the source's length.
  const key = createHash('sha256')
    .update(`${process.version}\0${process.arch}\0`)
    .update(bytes)
    .digest('hex')
    .slice(0, 24);
  // The bundle is ASCII (deploy/build/bundle-cli.mjs checks), so Latin-1 reads it as UTF-8 would, without decoding.
  const source = bytes.toString('latin1');
  const cacheFile = cacheDir ? join(cacheDir, `${key}.v8cache`) : undefined;
  const cachedData = cacheFile ? readIfThere(cacheFile) : undefined;
  const script = new Script(Module.wrap(source), { filename: bundle, ...(cachedData ? { cachedData } : {}) });
  const module = { exports: {} as T };
  const init = script.runInThisContext() as (
    exports: object,
    require: NodeJS.Require,
    module: object,
    filename: string,
    dirname: string,
  ) => void;
  init.call(module.exports, module.exports, createRequire(bundle), module, bundle, dirname(bundle));
  return {
    exports: module.exports,
    cache: !cacheFile ? 'off' : !cachedData ? 'none' : script.cachedDataRejected ? 'rejected' : 'used',
    saveCache: () => {
      if (cacheFile) writeCodeCache(cacheFile, script);
    },
  };
}

function readIfThere(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch {
    return undefined;
  }
}

/** How many caches a write keeps (the newest): two per build or Node (the commands', about 2 MB, and the prelude's). */
export const CACHES_KEPT = 6;

function writeCodeCache(file: string, script: Script): void {
  try {
    const dir = dirname(file);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const partial = `${file}.${process.pid}.tmp`;
    writeFileSync(partial, script.createCachedData(), { mode: 0o600 });
    renameSync(partial, file);
    const older = readdirSync(dir)
      .filter((name) => name.endsWith('.v8cache'))
      .map((name) => ({ path: join(dir, name), time: statSync(join(dir, name)).mtimeMs }))
      .sort((a, b) => b.time - a.time)
      .slice(CACHES_KEPT);
    for (const { path } of older) rmSync(path, { force: true });
  } catch {
    // Read-only home, full disk, another run pruning at once: the next run compiles again.
  }
}
