// How Ferry's workflow code is bundled, in one place: the worker at start, the prebuilt bundle of the image, the
// replay check and the tests all bundle with these options, so what runs in a test is what runs in production.
//
// Memory (docs/design/fleet.md, §1): with the SDK's reused V8 context, every module a workflow loads is instantiated
// once per workflow in the worker's cache: 1.8 MiB a cached workflow, zod and the document's schema built with it the
// most of it. zod and croner are preloaded (workflows/preloaded.ts): instantiated once per worker thread before any
// workflow, shared by every workflow, deep-frozen by the SDK (1.1 MiB a cached workflow then, bench:workflow-memory).
// The schema itself stays per workflow: zod 4 materializes a schema's methods on first use, which a frozen schema
// refuses (test/unit/workflow-bundle.test.ts shows both).
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, type Logger, type WorkflowBundleWithSourceMap } from '@temporalio/worker';

// Next to this module: `.ts` when run from the sources, `.js` when run from the package.
const EXT = extname(import.meta.url);
/** The workflows' entry. */
const WORKFLOWS_PATH = fileURLToPath(new URL(`../workflows/index${EXT}`, import.meta.url));
/** The module the bundle loads before any workflow: it imports the shared libraries (zod, croner). */
const PRELOADED_MODULES = [fileURLToPath(new URL(`../workflows/preloaded${EXT}`, import.meta.url))];

/**
 * Ferry's workflows (or the fixture at `workflowsPath`) bundled with the shared libraries preloaded; `preload: false`
 * leaves them per workflow, as before (bench/workflow-memory.ts compares the two).
 */
export async function bundleFerryWorkflows(
  logger: Logger,
  workflowsPath: string = WORKFLOWS_PATH,
  { preload = true }: { preload?: boolean } = {},
): Promise<WorkflowBundleWithSourceMap> {
  return await bundleWorkflowCode({ workflowsPath, logger, ...(preload ? { preloadModules: PRELOADED_MODULES } : {}) });
}
