#!/usr/bin/env node
// `ferry-worker …`: the compiled worker process (see `ferry-worker --help`).
import { existsSync, readFileSync } from 'node:fs';

const worker = new URL('../dist/worker/main.js', import.meta.url);
if (!existsSync(worker)) {
  process.stderr.write('error: dist/ is missing: run `npm run build` in the Ferry checkout first\n');
  process.exit(2);
}
try {
  await import(worker.href);
} catch (err) {
  // The worker's packages are optional peers of Ferry's (a project that only calls Ferry needs none of them): one
  // that is not installed is named with the command that installs what the worker needs, not a stack trace.
  const missing = err?.code === 'ERR_MODULE_NOT_FOUND' && /Cannot find package '([^']+)'/.exec(err.message)?.[1];
  const { peerDependencies = {} } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  if (!missing || !(missing in peerDependencies)) throw err;
  const install = Object.entries(peerDependencies).map(([name, range]) => `'${name}@${range}'`);
  process.stderr.write(
    `error: the worker needs ${missing}, which is not installed (Ferry's worker packages are optional peers):\n` +
      `  npm install ${install.join(' ')}\n`,
  );
  process.exit(2);
}
