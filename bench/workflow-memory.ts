// What each workflow in the worker's cache costs in module instances, with the shared libraries preloaded (as the
// worker bundles its workflows, worker/workflow-bundle.ts) and without, side by side in one process: the SDK's own
// reused V8 context (as the worker's workflow thread makes it), N workflow scopes each loading Ferry's workflows into
// a module cache of its own (as the SDK gives each workflow), V8's heap measured after a full GC before and after.
// The workflows' own state (their status, timers, promises) comes on top and is the same in both.
//
//   npm run bench:workflow-memory -- [--workflows 50]
import { parseArgs } from 'node:util';
import { DefaultLogger } from '@temporalio/worker';
import { bundleFerryWorkflows } from '../worker/workflow-bundle.js';
import { machine } from './lib.js';
import { reusedContext } from './reused-context.js';

const { values } = parseArgs({ options: { workflows: { type: 'string', default: '50' } } });
const n = Number(values.workflows);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc (npm run bench:workflow-memory does)');

function heapUsed(): number {
  gc!();
  gc!();
  return process.memoryUsage().heapUsed;
}

async function perWorkflow(preload: boolean): Promise<{ mibPerWorkflow: number; modulesPerWorkflow: number }> {
  const loaded = await reusedContext(await bundleFerryWorkflows(new DefaultLogger('ERROR'), undefined, { preload }));
  const scopes: Map<string, unknown>[] = [];
  const before = heapUsed();
  for (let i = 0; i < n; i++) scopes.push(loaded.workflowModules());
  const after = heapUsed();
  const result = { mibPerWorkflow: (after - before) / n / 2 ** 20, modulesPerWorkflow: scopes[0]!.size };
  await loaded.destroy();
  return result;
}

const without = await perWorkflow(false);
const withPreload = await perWorkflow(true);
console.log(
  JSON.stringify(
    {
      machine: machine(),
      workflows: n,
      withoutPreload: without,
      withPreload,
      ratio: without.mibPerWorkflow / withPreload.mibPerWorkflow,
    },
    null,
    2,
  ),
);
