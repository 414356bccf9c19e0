// No source file over 450 lines: a file that grows past it holds more than one concern, and a change to one of them
// (a workflow step, a spec section) should touch a file of its own (ARCHITECTURE.md, "Where to make a change").
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/local-env.js';

const MAX_LINES = 450;
const SOURCE_DIRS = ['workflows', 'activities', 'worker', 'client', 'deploy', 'bench', 'bin'];

function sourceFiles(): string[] {
  return SOURCE_DIRS.flatMap((dir) =>
    readdirSync(join(repoRoot, dir), { withFileTypes: true, recursive: true })
      .filter((e) => e.isFile() && /\.(ts|js)$/.test(e.name) && !e.parentPath.includes('node_modules'))
      .map((e) => join(e.parentPath, e.name)),
  );
}

describe('source files', () => {
  it(`are at most ${MAX_LINES} lines each`, () => {
    const files = sourceFiles();
    expect(files.length).toBeGreaterThan(100);
    const long = files
      .map((file) => ({ file: relative(repoRoot, file), lines: readFileSync(file, 'utf8').split('\n').length - 1 }))
      .filter((f) => f.lines > MAX_LINES)
      .map((f) => `${f.file}: ${f.lines} lines`);
    expect(long).toEqual([]);
  });
});
