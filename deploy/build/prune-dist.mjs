// `npm run build`'s step after tsc: removes what an earlier build left in dist/ and this one would not write — the
// output of a source file since deleted or renamed, a file an older build step made — so that `npm pack` ships only
// what the sources compile to now. Only such files go: a test reading dist/ while another packs is not disturbed.
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const dist = join(root, 'dist');
/** What the build writes beside the compiled modules. */
const KEPT = new Set(['build-info.json', 'build.tsbuildinfo']);

const removed = [];
for (const entry of readdirSync(dist, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile()) continue;
  const file = join(entry.parentPath, entry.name);
  const path = relative(dist, file);
  if (KEPT.has(path)) continue;
  const source = path.replace(/(\.d)?\.(js|ts|cjs|mjs)(\.map)?$/, '.ts');
  if (source === path || !existsSync(join(root, source))) {
    rmSync(file);
    removed.push(path);
  }
}
if (removed.length > 0) console.log(JSON.stringify({ msg: 'stale build output removed', files: removed }));
