// A history that Temporal's TypeScript SDK (1.24.0) cannot replay, recorded by the chaos suite's kill slice in CI
// (test/histories/upstream/update-after-lost-workflow-task.json). The worker was SIGKILLed while an update was on
// its way: the workflow task on the dead worker's sticky queue timed out (event 127), the new worker's watch sent a
// modelChanged signal (126), and the next task carried the update. Live, the new worker ran the signal first, while
// it answered a status query by replaying the history — a look was scheduled as activity 9 — and then the update, which cancelled the look before it was sent and scheduled
// claimName as activity 10. Replayed, the signal and the update arrive together: no look is started and claimName
// becomes activity 9, which history says is 10. The workflow task then fails on every worker (the model's workflow
// is stuck until someone resets it); in the chaos run it showed as a delete that did not converge.
//
// The same code made different commands from the same events, split into activations differently live and in replay
// (docs/resilience.md, "A wake and an update split by a query"). Runs since the `split-activation-safe` patch name
// their activities after what they are for, so such a history replays (test/integration/workflow/
// split-activations.test.ts makes one); this one, recorded before the patch, holds the SDK's numbers and never will.
// This test asserts the SDK's behaviour on it, so that an SDK upgrade that fixes the split itself is noticed: when it
// fails because the history replays, move the file into test/histories and delete this test.
import { join } from 'node:path';
import { DefaultLogger, Runtime, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { beforeAll, describe, expect, it } from 'vitest';
import { historyAndWorkflowId } from '../../support/history-files.js';
import { repoRoot } from '../../support/local-env.js';
import { TEST_SINKS, workflowBundle } from '../../support/workflow-harness.js';

let bundle: WorkflowBundleWithSourceMap;
beforeAll(async () => {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  bundle = await workflowBundle();
});

describe('a history the SDK splits differently in replay', () => {
  it('fails to replay with activity 9 against history activity 10 (an update after a lost workflow task)', async () => {
    const file = join(repoRoot, 'test', 'histories', 'upstream', 'update-after-lost-workflow-task.json');
    const results = Worker.runReplayHistories({ workflowBundle: bundle, sinks: TEST_SINKS }, [
      historyAndWorkflowId(file),
    ]);
    const errors: string[] = [];
    for await (const result of results) errors.push(result.error?.message ?? 'replayed');
    expect(errors).toEqual([
      expect.stringContaining("Activity id of scheduled event '10' does not match activity id of activity command '9'"),
    ]);
  });
});
