// How the CLI loads its commands from the build's bundle (client/cli/load-commands.ts): as CommonJS with its own
// `require`, compiled from a V8 code cache once one is written, with a cache of its own for each build, and never
// failing a command over a cache it cannot read or write. How much faster that is: `npm run bench:cli`.
import {
  chmodSync,
  copyFileSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CACHES_KEPT, codeCacheDir, loadBundle } from '../../client/cli/load-commands.js';

let dir: string;
let bundle: string;
let cacheDir: string;

// A distinct source per test, and a second load from a copy at another path: V8 would otherwise find the earlier
// compilation in its own memory and never read the cache.
const source = (answer: number) => `
  const { basename } = require('node:path');
  exports.answer = () => ${answer};
  exports.file = basename(__filename);
  exports.requireWorks = typeof require('node:os').cpus === 'function';
`;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ferry-load-'));
  bundle = join(dir, 'run.bundle.cjs');
  cacheDir = join(dir, 'cache', 'ferry', 'cli');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

type Exports = { answer: () => number; file: string; requireWorks: boolean };

/** The bundle, copied to another folder (the same content: the same cache). */
function copyOfBundle(): string {
  const copy = join(mkdtempSync(join(dir, 'copy-')), 'run.bundle.cjs');
  copyFileSync(bundle, copy);
  return copy;
}

describe('loadBundle', () => {
  it('runs the file as CommonJS, then compiles it from the cache it saved', () => {
    writeFileSync(bundle, source(Math.random()));
    const first = loadBundle<Exports>(bundle, cacheDir);
    expect(first.cache).toBe('none');
    expect(first.exports.file).toBe('run.bundle.cjs');
    expect(first.exports.requireWorks).toBe(true);
    first.saveCache();

    const files = readdirSync(cacheDir);
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^[0-9a-f]{24}\.v8cache$/);
    // Only the user may read or replace compiled code that their CLI will run.
    expect(statSync(cacheDir).mode & 0o777).toBe(0o700);
    expect(statSync(join(cacheDir, files[0]!)).mode & 0o777).toBe(0o600);

    const second = loadBundle<Exports>(copyOfBundle(), cacheDir);
    expect(second.cache).toBe('used');
    expect(second.exports.answer()).toBe(first.exports.answer());
  });

  it('compiles from source when V8 refuses the cache, and a save replaces it', () => {
    writeFileSync(bundle, source(Math.random()));
    loadBundle<Exports>(bundle, cacheDir).saveCache();
    const [file] = readdirSync(cacheDir);
    writeFileSync(join(cacheDir, file!), 'not a code cache at all, but the right name');

    const refused = loadBundle<Exports>(copyOfBundle(), cacheDir);
    expect(refused.cache).toBe('rejected');
    expect(refused.exports.requireWorks).toBe(true);
    refused.saveCache();
    expect(loadBundle<Exports>(copyOfBundle(), cacheDir).cache).toBe('used');
  });

  it('gives another build a cache of its own, even one of the same size and time', () => {
    const n = 10 + Math.floor(Math.random() * 80);
    writeFileSync(bundle, source(n));
    const { mtime } = statSync(bundle);
    loadBundle<Exports>(bundle, cacheDir).saveCache();
    writeFileSync(bundle, source(n + 1));
    utimesSync(bundle, mtime, mtime);

    const rebuilt = loadBundle<Exports>(bundle, cacheDir);
    expect(rebuilt.cache).toBe('none');
    expect(rebuilt.exports.answer()).toBe(n + 1);
    rebuilt.saveCache();
    expect(readdirSync(cacheDir)).toHaveLength(2);
  });

  it('runs without a cache when there is no place for one, or it cannot be written', () => {
    writeFileSync(bundle, source(Math.random()));
    const off = loadBundle<Exports>(bundle, undefined);
    expect(off.cache).toBe('off');
    expect(() => off.saveCache()).not.toThrow();

    const readOnly = join(dir, 'read-only');
    writeFileSync(readOnly, 'a file where the cache folder would go');
    chmodSync(readOnly, 0o400);
    const blocked = loadBundle<Exports>(bundle, join(readOnly, 'cli'));
    expect(blocked.cache).toBe('none');
    expect(() => blocked.saveCache()).not.toThrow();
    expect(loadBundle<Exports>(bundle, join(readOnly, 'cli')).cache).toBe('none');
  });

  it(`keeps the newest ${CACHES_KEPT} caches when it writes one`, () => {
    const builds = Array.from({ length: CACHES_KEPT + 2 }, (_, i) => join(dir, `build-${i}.cjs`));
    const buildOf = new Map<string, number>();
    builds.forEach((file, i) => {
      writeFileSync(file, source(100 + i));
      loadBundle<Exports>(file, cacheDir).saveCache();
      const [written] = readdirSync(cacheDir).filter((name) => !buildOf.has(name));
      buildOf.set(written!, i);
      // Each a minute newer than the one before, whatever the file system's clock resolution.
      const at = new Date(Date.now() - (builds.length - i) * 60_000);
      utimesSync(join(cacheDir, written!), at, at);
    });
    const kept = readdirSync(cacheDir).map((name) => buildOf.get(name));
    expect(kept.sort()).toEqual(Array.from({ length: CACHES_KEPT }, (_, i) => i + 2));
  });
});

describe('codeCacheDir', () => {
  it('is under XDG_CACHE_HOME, else ~/.cache', () => {
    expect(codeCacheDir({ XDG_CACHE_HOME: '/x/cache', HOME: '/home/u' })).toBe('/x/cache/ferry/cli');
    expect(codeCacheDir({ HOME: '/home/u' })).toBe('/home/u/.cache/ferry/cli');
    expect(codeCacheDir({ XDG_CACHE_HOME: '', HOME: '/home/u' })).toBe('/home/u/.cache/ferry/cli');
  });
});
