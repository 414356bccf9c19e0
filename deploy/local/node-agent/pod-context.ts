// What a pod's worker (pod-worker.ts) shares with the modules that run its containers: the agent's side (node, host),
// the pod as the worker sees it now (PodContext), each container's slot and current run, and small timing helpers.
import type { CoreV1Api, V1Container, V1ContainerStateTerminated, V1Pod, V1PodStatus } from '@kubernetes/client-node';
import type { ImageRuntime } from './images.js';
import type { PodAddress, PodNetwork } from './network.js';
import type { ContainerProcess } from './sandbox.js';
import type { Attachments } from './volumes.js';

export interface AgentNode {
  name: string;
  /** Third octet of the node's pod /24. */
  subnet: number;
  hostIp: string;
}

/** What a pod's worker needs from the agent. */
export interface PodHost {
  core: CoreV1Api;
  network: PodNetwork;
  attachments: Attachments;
  images: Record<string, ImageRuntime>;
  podsDir: string;
  volumesDir: string;
  patchStatus(pod: V1Pod, status: V1PodStatus): Promise<void>;
  event(pod: V1Pod, type: 'Normal' | 'Warning', reason: string, message: string, component?: string): void;
  log: (msg: string, extra?: Record<string, unknown>) => void;
  /** The pod is gone from the node: the agent forgets its worker. */
  finished(uid: string): void;
}

/** What a pod's containers see of their worker; the functions read the worker's state as it is at the call. */
export interface PodContext {
  readonly uid: string;
  /** The pod's directory under the agent's pods directory (logs, containers, volumes). */
  readonly dir: string;
  readonly node: AgentNode;
  readonly host: PodHost;
  /** Aborted when the pod stops (its deletion, the agent's shutdown). */
  readonly signal: AbortSignal;
  /** The newest version of the pod from the API server. */
  pod(): V1Pod;
  address(): PodAddress | undefined;
  stopping(): boolean;
  /** `<namespace>/<name>`, for the agent's log. */
  key(): string;
  /** Writes the pod's status soon (pod-worker.ts coalesces the writes). */
  writeStatus(): void;
}

export interface Run {
  proc: ContainerProcess;
  startedAt: string;
  started: boolean;
  ready: boolean;
  logFile: string;
  /** Set when the agent itself stops the run (a failed liveness or startup probe). */
  killedBy?: string;
}

export interface Slot {
  spec: V1Container;
  restartCount: number;
  run?: Run;
  waiting?: { reason: string; message?: string };
  lastTerminated?: V1ContainerStateTerminated;
  /** Ended for good (its restart policy does not restart it). */
  final?: V1ContainerStateTerminated;
  backoffS: number;
}

export const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done);
  });

export const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
