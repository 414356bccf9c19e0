// The previous release's worker, for the upgrade test: its sources taken from git by the commit that
// previous-release.json names (a clone need not carry tags), into a scratch directory outside the clone, with its own
// dependencies (this checkout's when the lock file is the same, else `npm ci`).
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, unlinkSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { WorkerLaunch } from '../support/e2e.js';
import { repoRoot } from '../support/local-env.js';

interface PreviousRelease {
  tag: string;
  commit: string;
}

export const PREVIOUS: PreviousRelease = JSON.parse(
  readFileSync(join(repoRoot, 'test/upgrade/previous-release.json'), 'utf8'),
) as PreviousRelease;

const git = (...args: string[]): Buffer => execFileSync('git', ['-C', repoRoot, ...args], { maxBuffer: 1 << 30 });

/** The previous release's checkout (made once, then reused) and how to run its worker from its sources. */
export function previousReleaseWorker(): WorkerLaunch {
  const cache = process.env.FERRY_CACHE ?? join(homedir(), '.cache', 'ferry');
  const dir = join(cache, 'upgrade', PREVIOUS.commit);
  if (!existsSync(join(dir, '.complete'))) {
    try {
      git('cat-file', '-e', `${PREVIOUS.commit}^{commit}`);
    } catch {
      throw new Error(
        `the previous release ${PREVIOUS.tag} (commit ${PREVIOUS.commit}) is not in this clone: fetch it (git fetch origin ${PREVIOUS.commit}) or clone without --depth`,
      );
    }
    const partial = `${dir}.partial-${process.pid}`;
    rmSync(partial, { recursive: true, force: true });
    mkdirSync(partial, { recursive: true });
    execFileSync('tar', ['-x', '-C', partial], { input: git('archive', PREVIOUS.commit) });
    execFileSync('touch', [join(partial, '.complete')]);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(join(cache, 'upgrade'), { recursive: true });
    renameSync(partial, dir);
  }
  // The same lock file: this checkout's dependencies, linked afresh each time (the checkout that linked them last
  // may be gone: CI clones anew); another: its own, installed once.
  const modules = join(dir, 'node_modules');
  if (lstatSync(modules, { throwIfNoEntry: false })?.isSymbolicLink()) unlinkSync(modules);
  if (!existsSync(modules)) {
    if (sameLock(dir)) symlinkSync(join(repoRoot, 'node_modules'), modules, 'dir');
    else execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: dir, stdio: 'inherit' });
  }
  return { args: ['--import', 'tsx', join(dir, 'worker/main.ts')], cwd: dir };
}

function sameLock(dir: string): boolean {
  const lock = (root: string) => readFileSync(join(root, 'package-lock.json'), 'utf8');
  return lock(dir) === lock(repoRoot);
}
