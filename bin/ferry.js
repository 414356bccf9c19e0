#!/usr/bin/env node
// `ferry …`: the compiled CLI (`npm run build` writes dist/; `npm ci` and `npm pack` run it through `prepare`).
import { existsSync } from 'node:fs';

const cli = new URL('../dist/client/cli.js', import.meta.url);
if (!existsSync(cli)) {
  process.stderr.write('error: dist/ is missing: run `npm run build` in the Ferry checkout first\n');
  process.exit(2);
}
const { main } = await import(cli.href);
await main();
