// One Node.js for the package, CI and the worker image: deploy/node/versions.env names it, and everything that says
// which Node.js Ferry runs on follows it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/local-env.js';

const read = (file: string) => readFileSync(join(repoRoot, file), 'utf8');
const pinned = /^NODE_VERSION=(\d+\.\d+\.\d+)$/m.exec(read('deploy/node/versions.env'))?.[1] ?? '';
const major = pinned.split('.')[0];
const pkg = JSON.parse(read('package.json')) as { engines: { node: string }; devDependencies: Record<string, string> };

describe(`the supported Node.js (${pinned})`, () => {
  it('is an exact version of an even-numbered (long-term support) major', () => {
    expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
    expect(Number(major) % 2).toBe(0);
  });

  it("is the package's engines floor, and its types are that major's", () => {
    expect(pkg.engines.node).toBe(`>=${major}`);
    expect(pkg.devDependencies['@types/node']?.split('.')[0]).toBe(major);
  });

  it("is the worker image's base, exactly", () => {
    expect(read('deploy/worker/Dockerfile')).toMatch(new RegExp(`^FROM node:${pinned.replace(/\./g, '\\.')}-`, 'm'));
  });

  it('is what version managers read (.node-version) and what CI installs (.ci/run sources deploy/node/env.sh)', () => {
    expect(read('.node-version').trim()).toBe(pinned);
    expect(read('.ci/run')).toMatch(/^source deploy\/node\/env\.sh$/m);
  });

  it('runs these tests in CI', () => {
    if (process.env.CI === 'true') expect(process.versions.node).toBe(pinned);
    expect(Number(process.versions.node.split('.')[0])).toBeGreaterThanOrEqual(Number(major));
  });
});
