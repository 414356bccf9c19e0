// The version keeper (worker/versioning.ts) when the server never reports its routing change done
// (temporalio/temporal#11842: routingConfigUpdateState stays IN_PROGRESS though the task queues have the new routing):
// it waits for the report a while, then wakes the runs pinned to older versions anyway, and says so once. A fake
// client stands in for Temporal: the state cannot be brought about on a real server at will.
import proto from '@temporalio/proto';
import type { Client } from '@temporalio/client';
import type { Logger } from '@temporalio/worker';
import { expect, it } from 'vitest';
import { keepVersion } from '../../worker/versioning.js';

const { RoutingConfigUpdateState, VersioningBehavior } = proto.temporal.api.enums.v1;

function fakeTemporal(state: number, changedAt: number) {
  const signalled: string[] = [];
  const client = {
    workflowService: {
      describeWorkerDeployment: async () => ({
        workerDeploymentInfo: {
          routingConfig: {
            currentDeploymentVersion: { buildId: 'v2' },
            currentVersionChangedTime: { seconds: Math.floor(changedAt / 1000), nanos: (changedAt % 1000) * 1e6 },
          },
          routingConfigUpdateState: state,
        },
      }),
    },
    workflow: {
      list: async function* () {
        yield { workflowId: 'servedmodel/c/ns/m', runId: 'run-1' };
      },
      getHandle: (workflowId: string) => ({
        describe: async () => ({
          raw: {
            workflowExecutionInfo: {
              versioningInfo: {
                behavior: VersioningBehavior.VERSIONING_BEHAVIOR_PINNED,
                deploymentVersion: { buildId: 'v1' },
              },
            },
          },
        }),
        signal: async () => void signalled.push(workflowId),
      }),
    },
  } as unknown as Client;
  return { client, signalled };
}

function recordingLogger() {
  const lines: { level: string; message: string; meta?: Record<string, unknown> }[] = [];
  const log = (level: string) => (message: string, meta?: Record<string, unknown>) =>
    void lines.push({ level, message, ...(meta ? { meta } : {}) });
  const logger = {
    log: (level: string, message: string, meta?: Record<string, unknown>) => log(level)(message, meta),
    trace: log('TRACE'),
    debug: log('DEBUG'),
    info: log('INFO'),
    warn: log('WARN'),
    error: log('ERROR'),
  } as unknown as Logger;
  return { logger, lines };
}

async function until(check: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const versioning = { deploymentName: 'ferry-c', buildId: 'v2' };

it('wakes the runs pinned elsewhere once a propagation has said IN_PROGRESS too long, and warns once', async () => {
  const { client, signalled } = fakeTemporal(
    RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_IN_PROGRESS,
    Date.now(),
  );
  const { logger, lines } = recordingLogger();
  const keeper = keepVersion(client, 'default', versioning, logger, {
    intervalMs: 50,
    propagationMs: 0,
    stuckPropagationMs: 2_500,
    rewakeAfterMs: 60_000,
  });
  try {
    // The first look is a second after the start; before the stuck limit nothing is woken.
    await new Promise((r) => setTimeout(r, 1_600));
    expect(signalled).toEqual([]);
    await until(() => signalled.length > 0, 5_000);
    expect(signalled).toEqual(['servedmodel/c/ns/m']);
    await new Promise((r) => setTimeout(r, 300));
    const warnings = lines.filter((l) => l.level === 'WARN');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({
      message: 'the deployment still reports its routing change in progress; waking the runs pinned elsewhere anyway',
      meta: { deploymentName: 'ferry-c', see: 'https://github.com/temporalio/temporal/issues/11842' },
    });
  } finally {
    keeper.stop();
  }
});

it('wakes them as soon as the server reports the propagation complete, without a warning', async () => {
  const { client, signalled } = fakeTemporal(
    RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_COMPLETED,
    Date.now(),
  );
  const { logger, lines } = recordingLogger();
  const keeper = keepVersion(client, 'default', versioning, logger, {
    intervalMs: 50,
    propagationMs: 0,
    stuckPropagationMs: 60_000,
  });
  try {
    await until(() => signalled.length > 0, 3_000);
    expect(lines.filter((l) => l.level === 'WARN')).toEqual([]);
  } finally {
    keeper.stop();
  }
});
