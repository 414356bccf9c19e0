// What a kubelet reports of a pod and its containers: a run's termination (exit code, OOMKilled, the termination
// message or the log's tail), each container's state, and the pod's phase and conditions.
import { existsSync, readFileSync } from 'node:fs';
import type {
  V1ContainerState,
  V1ContainerStateTerminated,
  V1ContainerStatus,
  V1PodCondition,
  V1PodStatus,
} from '@kubernetes/client-node';
import { now, type PodContext, type Run, type Slot } from './pod-context.js';
import type { ContainerExit } from './sandbox.js';

const MAX_TERMINATION_MESSAGE = 4096;
const FALLBACK_LOG_LINES = 80;
const FALLBACK_LOG_BYTES = 2048;

/** How a run ended, as the kubelet reports it: exit code, reason (OOMKilled…) and the termination message. */
export function terminatedState(
  uid: string,
  slot: Slot,
  run: Run,
  exit: ContainerExit,
  terminationFile: string,
): V1ContainerStateTerminated {
  let message = '';
  try {
    message = readFileSync(terminationFile, 'utf8').slice(0, MAX_TERMINATION_MESSAGE);
  } catch {
    // none written
  }
  if (!message && exit.exitCode !== 0 && slot.spec.terminationMessagePolicy === 'FallbackToLogsOnError') {
    const log = existsSync(run.logFile) ? readFileSync(run.logFile, 'utf8') : '';
    message = log
      .split('\n')
      .slice(-FALLBACK_LOG_LINES - 1)
      .join('\n')
      .slice(-FALLBACK_LOG_BYTES);
  }
  const reason = exit.oomKilled
    ? 'OOMKilled'
    : exit.exitCode === 0
      ? 'Completed'
      : exit.startError
        ? 'StartError'
        : 'Error';
  return {
    exitCode: exit.exitCode,
    reason,
    ...(message ? { message } : exit.startError ? { message: exit.startError } : {}),
    startedAt: run.startedAt as unknown as Date,
    finishedAt: now() as unknown as Date,
    containerID: containerId(uid, slot),
  };
}

function containerId(uid: string, slot: Slot): string {
  return `ferry-node-agent://${uid.slice(0, 12)}-${slot.spec.name}-${slot.restartCount}`;
}

function containerStatus(uid: string, slot: Slot): V1ContainerStatus {
  let state: V1ContainerState;
  if (slot.run) state = { running: { startedAt: slot.run.startedAt as unknown as Date } };
  else if (slot.final) state = { terminated: slot.final };
  else state = { waiting: slot.waiting ?? { reason: 'ContainerCreating' } };
  return {
    name: slot.spec.name,
    image: slot.spec.image ?? '',
    imageID: slot.run || slot.final || slot.lastTerminated ? `ferry-node-agent://${slot.spec.image}` : '',
    ...(slot.run || slot.final ? { containerID: containerId(uid, slot) } : {}),
    ready: slot.run?.ready === true,
    started: slot.run?.started === true,
    restartCount: slot.restartCount,
    state,
    lastState: slot.lastTerminated ? { terminated: slot.lastTerminated } : {},
  };
}

/**
 * The pod's status as a kubelet writes it: phase, conditions, addresses and every container's state. `sandboxReleased`:
 * the pod's network and volumes are gone (a finished pod).
 */
export function podStatus(
  ctx: PodContext,
  slots: readonly Slot[],
  sandboxReleased: boolean,
  startTime: string,
): V1PodStatus {
  const statuses = slots.map((s) => containerStatus(ctx.uid, s));
  const allFinal = slots.every((s) => s.final);
  const phase = allFinal
    ? slots.every((s) => s.final!.exitCode === 0)
      ? 'Succeeded'
      : 'Failed'
    : slots.some((s) => s.run || s.lastTerminated || s.final)
      ? 'Running'
      : 'Pending';
  const ready = !allFinal && statuses.every((s) => s.ready);
  const t = now() as unknown as Date;
  const address = ctx.address();
  const previous = new Map((ctx.pod().status?.conditions ?? []).map((c) => [c.type, c]));
  const condition = (type: string, ok: boolean, reason?: string): V1PodCondition => {
    const before = previous.get(type);
    const status = ok ? 'True' : 'False';
    return {
      type,
      status,
      lastProbeTime: null as unknown as Date,
      lastTransitionTime: before && before.status === status ? before.lastTransitionTime : t,
      ...(!ok && reason ? { reason } : {}),
    };
  };
  const notReady = allFinal ? 'PodCompleted' : 'ContainersNotReady';
  const conditions: V1PodCondition[] = [
    condition('PodReadyToStartContainers', address !== undefined && !sandboxReleased),
    condition('Initialized', true),
    condition('Ready', ready, notReady),
    condition('ContainersReady', ready, notReady),
    ...(previous.get('PodScheduled') ? [previous.get('PodScheduled')!] : []),
  ];
  return {
    phase,
    conditions,
    hostIP: ctx.node.hostIp,
    hostIPs: [{ ip: ctx.node.hostIp }],
    ...(address ? { podIP: address.ip, podIPs: [{ ip: address.ip }] } : {}),
    startTime: startTime as unknown as Date,
    containerStatuses: statuses,
  };
}
