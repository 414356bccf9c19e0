// `worker/main.ts` as a process: it starts with the real activities wired (Kubernetes from KUBECONFIG), polls its
// cluster's task queue, logs JSON lines without secrets, and drains on SIGTERM.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { expectPollingWorker } from '../../support/child-output.js';
import { runWorkerCommand } from '../../support/ferry-worker.js';
import { readLocalEnv, repoRoot } from '../../support/local-env.js';

it('polls its task queue, logs JSON without secrets, and stops cleanly on SIGTERM', async () => {
  const env = readLocalEnv();
  const cluster = `w-${randomBytes(4).toString('hex')}`;
  const secret = `s3cr3t-${randomBytes(6).toString('hex')}`;
  const child = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'worker', 'main.ts')], {
    cwd: repoRoot,
    env: {
      PATH: process.env.PATH,
      HOME: mkdtempSync(join(tmpdir(), 'ferry-home-')),
      KUBECONFIG: env.KUBECONFIG,
      TEMPORAL_ADDRESS: env.TEMPORAL_ADDRESS,
      FERRY_CLUSTER: cluster,
      FERRY_SHUTDOWN_GRACE: '2s',
      // The dev server ignores this header; its value must never be logged.
      TEMPORAL_GRPC_META_AUTHORIZATION: `Bearer ${secret}`,
    },
  });
  const output = await expectPollingWorker(child, cluster, 90_000);

  const stdout = output.stdout();
  const lines = stdout.trimEnd().split('\n');
  const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  expect(entries[0]).toMatchObject({
    msg: 'starting',
    level: 'info',
    config: { cluster, taskQueue: `ferry-${cluster}`, temporal: { grpcMeta: { authorization: '[redacted]' } } },
  });
  expect(entries.map((e) => e.msg)).toEqual(expect.arrayContaining(['kubernetes', 'polling', 'stopped']));
  expect(entries.find((e) => e.msg === 'kubernetes')).toMatchObject({ server: expect.stringMatching(/^https:\/\//) });
  expect(stdout + output.stderr()).not.toContain(secret);
}, 120_000);

it('does not start with a tenants file that is wrong, and says which grant and field', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-tenants-'));
  const file = join(dir, 'tenants.yaml');
  writeFileSync(file, 'tenants:\n  team-a:\n    nexusTaskQueue: ferry-nexus-team-a\n    clusters: [gpu-east]\n');
  const run = await runWorkerCommand(['--tenants', file]);
  expect(run.code).toBe(2);
  const line = JSON.parse(run.stdout.split('\n').find((l) => l.includes('invalid configuration'))!);
  expect(line.error).toContain('tenants.team-a.namespaces');
  expect(line.error).toContain('tenants.team-a.gpus: is required');
});

it('does not start with a NetworkPolicy per model it could not admit itself to, and says why', async () => {
  // Outside a pod the worker reaches engines through the API server's proxy, which a policy cannot admit.
  const run = await runWorkerCommand(['--network-policy', 'on', '--worker-namespace', 'ops']);
  expect(run.code).toBe(2);
  const line = JSON.parse(run.stdout.split('\n').find((l) => l.includes('invalid configuration'))!);
  expect(line.error).toContain('give --worker-pod-labels');
  expect(line.error).toContain('needs a worker that reaches engines from its own pod (FERRY_ENDPOINT_MODE=in-cluster)');
});
