import { existsSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/local-env.js';

// Workflow code runs in Temporal's deterministic sandbox: nothing with Node or Kubernetes dependencies may reach
// the bundle. Walks every import (values and types) reachable from the bundle's entry point.
const FORBIDDEN_PACKAGES = [
  '@kubernetes/client-node',
  '@temporalio/activity',
  '@temporalio/worker',
  '@temporalio/client',
];

function importsOf(file: string): { spec: string; typeOnly: boolean }[] {
  const text = readFileSync(file, 'utf8');
  const found: { spec: string; typeOnly: boolean }[] = [];
  for (const m of text.matchAll(/^\s*(import|export)\s+(type\s+)?[^'"]*?from\s+'([^']+)'/gms)) {
    found.push({ spec: m[3]!, typeOnly: Boolean(m[2]) });
  }
  return found;
}

function reachable(entry: string): { files: Set<string>; packages: Map<string, string> } {
  const files = new Set<string>();
  const packages = new Map<string, string>();
  const queue = [entry];
  while (queue.length) {
    const file = queue.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    for (const { spec } of importsOf(file)) {
      if (spec.startsWith('.')) {
        // Sources import `./x.js` for `./x.ts`, as Node's ESM resolution of the compiled package needs.
        const target = [resolve(dirname(file), spec.replace(/\.js$/, '.ts'))].find(existsSync);
        if (!target) throw new Error(`${relative(repoRoot, file)} imports ${spec}, which does not resolve`);
        queue.push(target);
      } else {
        packages.set(spec, relative(repoRoot, file));
      }
    }
  }
  return { files, packages };
}

describe('the workflow bundle', () => {
  const { files, packages } = reachable(join(repoRoot, 'workflows/index.ts'));

  it('reaches no Node built-in and no package that does I/O', () => {
    const bad = [...packages].filter(
      ([spec]) =>
        spec.startsWith('node:') || builtinModules.includes(spec) || FORBIDDEN_PACKAGES.some((p) => spec.startsWith(p)),
    );
    expect(bad).toEqual([]);
  });

  it('reaches nothing outside workflows/', () => {
    const outside = [...files].map((f) => relative(repoRoot, f)).filter((f) => !f.startsWith('workflows/'));
    expect(outside).toEqual([]);
  });
});

describe('the contract', () => {
  const { files } = reachable(join(repoRoot, 'workflows/contract/index.ts'));

  it('depends on nothing of Ferry outside workflows/contract/', () => {
    const outside = [...files].map((f) => relative(repoRoot, f)).filter((f) => !f.startsWith('workflows/contract/'));
    expect(outside).toEqual([]);
  });
});
