import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { DefaultLogger, Runtime, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { beforeAll, describe, expect, it } from 'vitest';
import { historyAndWorkflowId, readHistory, withSignal } from '../../support/history-files.js';
import { repoRoot } from '../../support/local-env.js';
import { TEST_SINKS, workflowBundle } from '../../support/workflow-harness.js';

// Histories recorded from real runs (test/histories/record.ts for ServeModelWorkflow, record-move.ts for
// MoveModelWorkflow, record-place.ts for PlaceModelWorkflow) must replay on today's workflow code: a change that breaks
// determinism fails here, not in production.
const dir = join(repoRoot, 'test', 'histories');
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .sort();

let bundle: WorkflowBundleWithSourceMap;
beforeAll(async () => {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  bundle = await workflowBundle();
});

describe('ServeModelWorkflow replay', () => {
  it('has recorded histories to replay', () => {
    expect(files.length).toBeGreaterThanOrEqual(4);
  });

  it.each(files)('replays %s deterministically', async (file) => {
    const results = Worker.runReplayHistories({ workflowBundle: bundle, sinks: TEST_SINKS }, [
      historyAndWorkflowId(join(dir, file)),
    ]);
    for await (const result of results) {
      expect(result.error).toBeUndefined();
    }
  });
});

describe('ServeModelWorkflow replay of a spec accepted by older checks', () => {
  it('replays a history whose start spec a newer rule refuses (an abbreviated --port), as it ran', async () => {
    const history = readHistory(join(dir, 'ready-update-delete.json'));
    const payload = history.events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads![0]!;
    const input = JSON.parse(Buffer.from(payload.data!).toString('utf8')) as {
      spec: { spec: { engine: { args: string[] } } };
    };
    // Accepted before the parser knew that vLLM reads `--por` as `--port`.
    input.spec.spec.engine.args = ['--por=9000'];
    payload.data = Buffer.from(JSON.stringify(input));
    const results = Worker.runReplayHistories({ workflowBundle: bundle, sinks: TEST_SINKS }, [
      { workflowId: 'older-checks', history },
    ]);
    for await (const result of results) {
      expect(result.error).toBeUndefined();
    }
  });
});

describe('ServeModelWorkflow replay of a spec accepted before the bounds and the image grammar', () => {
  // Accepted before (and failed later, at the API server): a history holding one replays as it ran, because the
  // `stricter-spec-checks` marker is written only when a start is refused, and its start was not.
  it.each<[string, (spec: { engine: Record<string, unknown>; puller: Record<string, unknown> }) => void]>([
    ['an image with a non-ASCII character', (spec) => (spec.engine.image = 'vllm/vllm-öpenai:v0.32.0')],
    ['a startup timeout past 32-bit seconds', (spec) => (spec.engine.startupTimeout = '25000d')],
    ['a backoff limit past 32 bits', (spec) => (spec.puller.backoffLimit = 2 ** 31)],
  ])('replays a history whose start spec has %s', async (_what, patch) => {
    const history = readHistory(join(dir, 'ready-update-delete.json'));
    const payload = history.events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads![0]!;
    const input = JSON.parse(Buffer.from(payload.data!).toString('utf8')) as {
      spec: { spec: { engine: Record<string, unknown>; puller: Record<string, unknown> } };
    };
    input.spec.spec.puller ??= {};
    patch(input.spec.spec);
    payload.data = Buffer.from(JSON.stringify(input));
    const results = Worker.runReplayHistories({ workflowBundle: bundle, sinks: TEST_SINKS }, [
      { workflowId: 'before-bounds', history },
    ]);
    for await (const result of results) {
      expect(result.error).toBeUndefined();
    }
  });
});

describe('ServeModelWorkflow replay of signals sent before it handled them', () => {
  // Before the `signalled-changes` patch the update and delete signals had no handler: a history may hold one that
  // was ignored, mid-rollout here. It replays ignored; acted on, the delete would cancel the rollout and not match.
  it.each([
    ['delete', { reason: 'tried the signal' }],
    ['update', { spec: { replicas: 2 } }],
  ])('replays a history holding an ignored %s signal', async (name, input) => {
    const history = withSignal(join(dir, 'ready-update-delete.json'), 29, name, input);
    const results = Worker.runReplayHistories({ workflowBundle: bundle, sinks: TEST_SINKS }, [
      { workflowId: `ignored-${name}`, history },
    ]);
    for await (const result of results) {
      expect(result.error).toBeUndefined();
    }
  });
});
