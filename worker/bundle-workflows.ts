// Builds the workflow bundle ahead of time (for an image that should not bundle at start):
// `node --import tsx worker/bundle-workflows.ts dist/workflow-bundle.js`, then run the worker with
// `--workflow-bundle dist/workflow-bundle.js` (built by the same @temporalio/worker version).
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { DefaultLogger } from '@temporalio/worker';
import { bundleFerryWorkflows } from './workflow-bundle.js';

const out = resolve(process.argv[2] ?? 'dist/workflow-bundle.js');
const { code } = await bundleFerryWorkflows(new DefaultLogger('WARN'));
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, code);
process.stdout.write(`${JSON.stringify({ msg: 'workflow bundle written', path: out, bytes: code.length })}\n`);
