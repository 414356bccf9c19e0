import type { V1Job, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { classifyPod } from '../../activities/readers/pod-problems.js';
import {
  backoffFailure,
  currentPod,
  deadlineFailure,
  describeProgress,
  jobEnd,
  pullerProgress,
} from '../../activities/readers/puller-status.js';
import { FAILURE, formatBytes } from '../../workflows/contract/index.js';

const job = (conditions: { type: string; status: string; reason?: string }[] = [], failed = 0): V1Job => ({
  metadata: { name: 'qwen-pull-1a2b3c4d' },
  spec: { activeDeadlineSeconds: 7200, backoffLimit: 2, template: {} },
  status: { conditions: conditions, failed },
});

const pod = (name: string, created: string, status: V1Pod['status']): V1Pod => ({
  metadata: { name, creationTimestamp: created as unknown as Date },
  status,
});

const running = pod('p1', '2026-01-01T00:00:00Z', {
  phase: 'Running',
  containerStatuses: [
    { name: 'puller', image: 'i', imageID: '', ready: true, restartCount: 0, state: { running: {} } },
  ],
});
const failedPod = (exitCode: number) =>
  pod('p0', '2025-12-31T23:00:00Z', {
    phase: 'Failed',
    containerStatuses: [
      {
        name: 'puller',
        image: 'i',
        imageID: '',
        ready: false,
        restartCount: 0,
        state: { terminated: { exitCode, reason: 'Error' } },
      },
    ],
  });

describe('jobEnd', () => {
  it('reads Complete, Failed and FailureTarget; nothing while the Job runs', () => {
    expect(jobEnd(job())).toBeUndefined();
    expect(jobEnd(job([{ type: 'Complete', status: 'True' }]))).toEqual({ kind: 'complete' });
    expect(jobEnd(job([{ type: 'FailureTarget', status: 'True', reason: 'DeadlineExceeded' }]))).toMatchObject({
      kind: 'failed',
      reason: 'DeadlineExceeded',
    });
    expect(jobEnd(job([{ type: 'Failed', status: 'False' }]))).toBeUndefined();
  });
});

describe('pullerProgress', () => {
  it('names the newest pod, its state and the bytes the puller printed', () => {
    const log = 'noise\nFERRY_PROGRESS {"bytes": 1073741824, "totalBytes": 4294967296}\n';
    const p = currentPod([failedPod(1), running]);
    expect(p?.metadata?.name).toBe('p1');
    expect(pullerProgress(job(), p, undefined, log)).toEqual({
      step: 'download',
      state: 'Running',
      message: 'pod p1 is Running',
      bytes: 1073741824,
      totalBytes: 4294967296,
    });
  });

  it('reports a waiting reason (Unschedulable) as the state', () => {
    const pending = pod('p2', '2026-01-01T00:00:00Z', {
      phase: 'Pending',
      conditions: [
        { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/2 nodes are available' },
      ],
    });
    const progress = pullerProgress(job(), pending, classifyPod(pending), undefined);
    expect(progress).toMatchObject({ state: 'Unschedulable', message: expect.stringContaining('0/2 nodes') });
    expect(describeProgress(progress)).toBe('Unschedulable: pod p2 waits for a node: 0/2 nodes are available');
  });

  it('shows a failed attempt the Job will retry', () => {
    const p = failedPod(2);
    expect(pullerProgress(job([], 1), p, classifyPod(p), undefined)).toMatchObject({
      state: 'Retrying',
      message: 'pod p0 failed with exit code 2 (Error); 1 of 3 attempts failed',
    });
  });
});

describe('failures', () => {
  it('DeadlineExceeded says the deadline and the last state', () => {
    const err = deadlineFailure(job(), { step: 'download', state: 'Running', bytes: 1536, totalBytes: 1 << 30 });
    expect(err.type).toBe(FAILURE.DeadlineExceeded);
    expect(err.nonRetryable).toBe(true);
    expect(err.message).toBe(
      'download did not finish within 2h (puller.deadline); last state: Running, 1.5 KiB of 1.0 GiB downloaded',
    );
  });

  it("a reason the puller named is the failure; otherwise BackoffLimitExceeded with the puller's reason and log tail", () => {
    const log = 'a\nb\nFERRY_ERROR {"reason": "NoSpace", "message": "the volume is full: raise spec.storage.size"}\n';
    const failed = job([{ type: 'Failed', status: 'True', reason: 'BackoffLimitExceeded' }], 3);
    const end = { kind: 'failed', reason: 'BackoffLimitExceeded', message: '' } as const;
    const err = backoffFailure(failed, end, failedPod(1), log);
    expect(err.type).toBe(FAILURE.NoSpace);
    expect(err.message).toBe(
      'the volume is full: raise spec.storage.size; the puller failed 3 times (puller.backoffLimit 2 allows 3); last pod p0 exited with code 1',
    );
    expect(err.details?.[0]).toMatchObject({ exitCode: 1, errorReason: 'NoSpace' });

    const other =
      'FERRY_ERROR {"reason": "DownloadFailed", "message": "the download failed (ConnectionError: reset)"}\n';
    const generic = backoffFailure(failed, end, failedPod(1), other);
    expect(generic.type).toBe(FAILURE.BackoffLimitExceeded);
    expect(generic.message).toMatch(
      /^the puller failed 3 times \(puller\.backoffLimit 2 allows 3\); last pod p0 exited with code 1; DownloadFailed: the download failed/,
    );

    const unlogged = backoffFailure(failed, end, failedPod(137), undefined);
    expect(unlogged.message).toMatch(/exited with code 137; log tail: log unavailable$/);
  });

  it('formats sizes for people', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(15 * 1024 ** 3)).toBe('15.0 GiB');
  });
});
