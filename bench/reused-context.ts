// A workflow bundle loaded as the worker's workflow thread loads it (the SDK's reused V8 context, its inline source
// map parsed), and one workflow's own modules in it: the SDK gives each workflow a module cache of its own (its
// activator's) and serves preloaded modules from the context's. Used by bench/workflow-memory.ts and
// test/unit/workflow-bundle.test.ts.
import vm from 'node:vm';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { parseWorkflowCode } from '@temporalio/worker/lib/worker.js';
import { ReusableVMWorkflowCreator } from '@temporalio/worker/lib/workflow/reusable-vm.js';

export interface ReusedContext {
  context: vm.Context;
  /** Ferry's workflows loaded into a fresh module cache, as for one more workflow; that cache. */
  workflowModules(): Map<string, { exports: Record<string, unknown> }>;
  destroy(): Promise<void>;
}

export async function reusedContext(bundle: WorkflowBundleWithSourceMap): Promise<ReusedContext> {
  const creator = await ReusableVMWorkflowCreator.create(parseWorkflowCode(bundle.code), 5_000, new Set());
  const context = (creator as unknown as { _context: vm.Context })._context;
  return {
    context,
    workflowModules() {
      const own = new Map<string, { exports: Record<string, unknown> }>();
      context.__TEMPORAL_ACTIVATOR__ = { moduleCache: own };
      vm.runInContext('__TEMPORAL__.importWorkflows()', context);
      return own;
    },
    async destroy() {
      delete context.__TEMPORAL_ACTIVATOR__;
      await creator.destroy();
    },
  };
}
