import type { ChildProcess } from 'node:child_process';
import { Client, Connection } from '@temporalio/client';
import { expect } from 'vitest';
import { hasWorker } from '../../client/model-status.js';
import { eventually } from './ferry-worker.js';
import { readLocalEnv } from './local-env.js';

/** What a spawned process printed so far, and its exit. */
export interface ChildOutput {
  stdout(): string;
  stderr(): string;
  /** The exit code, once the process has exited and its output is all read. */
  exited: Promise<number | null>;
  /**
   * Resolves once stdout contains `text`, or the process exits, or `timeoutMs` pass: the caller asserts which, so a
   * failure shows the output.
   */
  untilStdout(text: string, timeoutMs: number): Promise<void>;
}

export function followOutput(child: ChildProcess): ChildOutput {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk) => (stdout += chunk));
  child.stderr?.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return {
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    async untilStdout(text, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while (!stdout.includes(text) && Date.now() < deadline && child.exitCode === null) {
        await new Promise((r) => setTimeout(r, 200));
      }
    },
  };
}

/**
 * The worker process `child` of `cluster` polls its task queue within `timeoutMs` (by its log, and as the server sees
 * it), `whilePolling` checks it further, and it exits 0 on SIGTERM; it is killed if it is left running.
 */
export async function expectPollingWorker(
  child: ChildProcess,
  cluster: string,
  timeoutMs: number,
  whilePolling: () => void = () => undefined,
): Promise<ChildOutput> {
  const output = followOutput(child);
  const connection = await Connection.connect({ address: readLocalEnv().TEMPORAL_ADDRESS });
  const client = new Client({ connection });
  try {
    await output.untilStdout('"msg":"polling"', timeoutMs);
    expect(output.stdout(), output.stderr()).toContain('"msg":"polling"');
    // The server sees the poller a moment after the worker starts polling.
    expect(
      await eventually(
        () => hasWorker(client, `ferry-${cluster}`),
        (seen) => seen,
      ),
    ).toBe(true);
    whilePolling();
    child.kill('SIGTERM');
    expect(await output.exited).toBe(0);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await connection.close();
  }
  return output;
}

/** Whether a process of this pid runs (signal 0 checks without sending anything). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
