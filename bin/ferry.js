#!/usr/bin/env node
// `ferry …`: the compiled CLI (`npm run build` writes dist/; `npm ci` and `npm pack` run it through `prepare`).
import { existsSync, mkdirSync } from 'node:fs';
import module from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';

const cli = new URL('../dist/client/cli.js', import.meta.url);
if (!existsSync(cli)) {
  process.stderr.write('error: dist/ is missing: run `npm run build` in the Ferry checkout first\n');
  process.exit(2);
}
enableCompileCache();
const { main } = await import(cli.href);
await main();

/**
 * Node's compile cache for the modules a command loads (zod, YAML, the Temporal client, gRPC, protobuf: several
 * hundred), so that a run after the first compiles almost nothing (docs/performance.md#cli-start). In the user's own
 * cache directory, made theirs alone (whoever loads compiled code trusts it), not Node's default in the shared
 * temporary directory; NODE_COMPILE_CACHE, when set, wins, as Node documents. Best effort: no directory, no cache.
 */
function enableCompileCache() {
  const { env } = process;
  if (env.NODE_COMPILE_CACHE !== undefined || env.NODE_DISABLE_COMPILE_CACHE) return;
  let dir;
  try {
    dir = env.XDG_CACHE_HOME ? join(env.XDG_CACHE_HOME, 'ferry', 'node') : join(homedir(), '.cache', 'ferry', 'node');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch {
    return;
  }
  module.enableCompileCache?.(dir);
}
