// `npm run build`'s last step: dist/build-info.json, the package version and the commit this build was made from. The
// worker's build ID (Worker Versioning) is `<version>-<commit>` (worker/versioning.ts); a build from a tree with
// uncommitted changes says so (`-dirty`), and one made outside a checkout has no commit (set FERRY_BUILD_ID then).
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const { version } = JSON.parse(readFileSync(`${root}package.json`, 'utf8'));
const git = (...args) =>
  execFileSync('git', ['-C', root, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
let commit;
try {
  commit = git('rev-parse', '--short=12', 'HEAD');
  if (git('status', '--porcelain', '--untracked-files=no') !== '') commit += '-dirty';
} catch {
  commit = undefined;
}
const info = { version, ...(commit ? { commit } : {}) };
writeFileSync(`${root}dist/build-info.json`, `${JSON.stringify(info)}\n`);
process.stdout.write(`${JSON.stringify({ buildInfo: info })}\n`);
