#!/usr/bin/env node
// `ferry-worker …`: the compiled worker process (see `ferry-worker --help`).
import { existsSync } from 'node:fs';

const worker = new URL('../dist/worker/main.js', import.meta.url);
if (!existsSync(worker)) {
  process.stderr.write('error: dist/ is missing: run `npm run build` in the Ferry checkout first\n');
  process.exit(2);
}
await import(worker.href);
