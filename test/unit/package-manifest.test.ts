// package.json as a library's users read it, and the worker image's manifest beside it (deploy/worker/package.json):
// the Temporal SDK and the Kubernetes client are peers, tested at the floor of their range and at the version the
// lock file pins (test/integration/package/package.test.ts installs both); the image installs exactly what the lock
// file tests.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/local-env.js';

interface Manifest {
  name: string;
  version: string;
  license?: string;
  repository?: { url: string };
  homepage?: string;
  bugs?: { url: string };
  dependencies: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  devDependencies?: Record<string, string>;
}
const json = <T>(file: string): T => JSON.parse(readFileSync(join(repoRoot, file), 'utf8')) as T;
const pkg = json<Manifest>('package.json');
const lock = json<{ packages: Record<string, { version: string }> }>('package-lock.json');
const image = json<Manifest>('deploy/worker/package.json');
const imageLock = json<{ packages: Record<string, { version: string }> }>('deploy/worker/package-lock.json');
const peers = pkg.peerDependencies ?? {};
const locked = (name: string) => lock.packages[`node_modules/${name}`]?.version;

/** `^a.b.c` → [a, b, c]: the only form the peers use. */
function caretFloor(range: string): number[] {
  const match = /^\^(\d+)\.(\d+)\.(\d+)$/.exec(range);
  expect(match, `${range} is a caret range`).not.toBeNull();
  return match!.slice(1).map(Number);
}

function satisfiesCaret(version: string, range: string): boolean {
  const [major, minor, patch] = version.split('.').map(Number) as [number, number, number];
  const [m, n, p] = caretFloor(range) as [number, number, number];
  if (m > 0) return major === m && (minor > n || (minor === n && patch >= p));
  if (n > 0) return major === 0 && minor === n && patch >= p;
  return major === 0 && minor === 0 && patch === p;
}

describe('package.json', () => {
  it('says its licence and where it lives', () => {
    expect(pkg.license).toBe('Apache-2.0');
    expect(readFileSync(join(repoRoot, 'LICENSE'), 'utf8')).toContain(
      'Apache License\n                           Version 2.0',
    );
    expect(pkg.repository?.url).toMatch(/^git\+https:\/\/github\.com\/[^/]+\/[^/]+\.git$/);
    expect(pkg.homepage).toMatch(/^https:\/\//);
    expect(pkg.bugs?.url).toMatch(/^https:\/\//);
  });

  it("ships a README whose links work where the package is read (npm's page, node_modules): absolute ones", () => {
    const links = [...readFileSync(join(repoRoot, 'README.md'), 'utf8').matchAll(/\]\(([^)]+)\)/g)].map((m) => m[1]!);
    expect(links.length).toBeGreaterThan(5);
    expect(links.filter((link) => !/^(https:\/\/|#)/.test(link))).toEqual([]);
    const repo = pkg.repository!.url.replace(/^git\+/, '').replace(/\.git$/, '');
    for (const link of links.filter((l) => l.startsWith(`${repo}/blob/main/`))) {
      const file = link.slice(`${repo}/blob/main/`.length).replace(/#.*$/, '');
      expect(() => readFileSync(join(repoRoot, file)), link).not.toThrow();
    }
  });

  it('has the Temporal SDK and the Kubernetes client as peers, the worker-only ones optional', () => {
    expect(Object.keys(pkg.dependencies).filter((name) => name.startsWith('@temporalio/'))).toEqual([]);
    expect(pkg.dependencies['@kubernetes/client-node']).toBeUndefined();
    const temporal = Object.entries(peers).filter(([name]) => name.startsWith('@temporalio/'));
    expect(temporal.length).toBeGreaterThanOrEqual(6);
    // One range for every @temporalio/* package: they depend on each other at exact versions.
    expect(new Set(temporal.map(([, range]) => range)).size).toBe(1);
    const optional = Object.entries(pkg.peerDependenciesMeta ?? {})
      .filter(([, meta]) => meta.optional)
      .map(([name]) => name)
      .sort();
    expect(optional).toEqual([
      '@kubernetes/client-node',
      '@temporalio/nexus',
      '@temporalio/proto',
      '@temporalio/worker',
    ]);
  });

  it('develops and tests against versions inside the peer ranges', () => {
    for (const [name, range] of Object.entries(peers)) {
      expect(pkg.devDependencies?.[name] ?? locked(name), name).toBe(locked(name));
      expect(satisfiesCaret(locked(name)!, range), `${name}@${locked(name)} within ${range}`).toBe(true);
    }
  });
});

describe("the worker image's manifest (deploy/worker/package.json)", () => {
  it("installs the package's dependencies and every peer, at the versions the repository's lock file tests", () => {
    expect(image.version).toBe(pkg.version);
    const expected = Object.fromEntries(
      [...Object.keys(pkg.dependencies), ...Object.keys(peers)].sort().map((name) => [name, locked(name)]),
    );
    expect(image.dependencies).toEqual(expected);
  });

  it('has a lock file that holds the same', () => {
    for (const [name, version] of Object.entries(image.dependencies)) {
      expect(imageLock.packages[`node_modules/${name}`]?.version, name).toBe(version);
    }
  });
});
