// `worker/main.ts` as a process: it starts with the real activities wired (Kubernetes from KUBECONFIG), polls its
// cluster's task queue, logs JSON lines without secrets, and drains on SIGTERM.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { expect, it } from 'vitest';
import { hasWorker } from '../../../client/model-status';
import { readLocalEnv, repoRoot } from '../../support/local-env';

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
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));

  const connection = await Connection.connect({ address: env.TEMPORAL_ADDRESS });
  const client = new Client({ connection });
  try {
    const deadline = Date.now() + 90_000;
    while (!stdout.includes('"msg":"polling"') && Date.now() < deadline && child.exitCode === null) {
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(stdout, stderr).toContain('"msg":"polling"');
    // The server sees the poller a moment after the worker starts polling.
    let polled = false;
    for (let i = 0; i < 50 && !polled; i++) {
      polled = await hasWorker(client, `ferry-${cluster}`);
      if (!polled) await new Promise((r) => setTimeout(r, 200));
    }
    expect(polled).toBe(true);

    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await connection.close();
  }

  const lines = stdout.trimEnd().split('\n');
  const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  expect(entries[0]).toMatchObject({
    msg: 'starting',
    level: 'info',
    config: { cluster, taskQueue: `ferry-${cluster}`, temporal: { grpcMeta: { authorization: '[redacted]' } } },
  });
  expect(entries.map((e) => e.msg)).toEqual(expect.arrayContaining(['kubernetes', 'polling', 'stopped']));
  expect(entries.find((e) => e.msg === 'kubernetes')).toMatchObject({ server: expect.stringMatching(/^https:\/\//) });
  expect(stdout + stderr).not.toContain(secret);
}, 120_000);
