// The failure catalogue: every failure type Ferry throws (`ApplicationFailure.type`), whether a retry can fix it,
// and what it means. Status shows the type as the reason; the workflow's retry policies and its classification read
// `retryable` from here, and every throw goes through `failure()`, so the flag is stated once.
import { ApplicationFailure } from '@temporalio/common';

interface FailureKind {
  /** A later attempt may succeed; false ends the step (and the reconcile) in phase Failed at once. */
  retryable: boolean;
  /** One line for the person reading status. */
  meaning: string;
}

export const FAILURES = {
  // --- claiming the name and the volume
  NameConflict: { retryable: false, meaning: 'an object with a name the model needs belongs to someone else' },
  ObjectsTerminating: { retryable: true, meaning: 'objects of the model are still being deleted; tried again' },
  VolumeTerminating: { retryable: false, meaning: 'our own PVC is stuck terminating behind a pod that is not ours' },
  VolumeBeingDeleted: { retryable: true, meaning: 'the weights PVC is being deleted; it is created again once gone' },
  VolumeLost: { retryable: false, meaning: 'the weights PVC is Lost: its PersistentVolume, and the data, are gone' },
  // --- the Kubernetes API
  KubernetesRejected: {
    retryable: false,
    meaning: 'the API server refused the request as invalid (400, 422), or the object is not there (404)',
  },
  Forbidden: {
    retryable: false,
    meaning:
      "RBAC forbids the worker's identity the request (403), or a tenant's grant forbids the tenant the model (docs/security.md)",
  },
  KubernetesUnreachable: { retryable: true, meaning: 'the API server could not be reached' },
  KubernetesHttp: {
    retryable: true,
    meaning: 'the API server answered with a retryable HTTP error; the type names the code (KubernetesHttp503)',
  },
  KubernetesAllocationFailed: {
    retryable: true,
    meaning: "the API server could not allocate a Service's cluster IP or node port for a reason of its own (422)",
  },
  KubernetesIncomplete: { retryable: true, meaning: 'the API server returned an object without a field it sets' },
  // --- the puller
  DeadlineExceeded: { retryable: false, meaning: 'the download did not finish within puller.deadline' },
  BackoffLimitExceeded: { retryable: false, meaning: "the puller's pods failed more than puller.backoffLimit times" },
  VolumeNotReleased: { retryable: true, meaning: "the puller's pod is not gone yet, so the volume may be attached" },
  // The puller's own words for why every attempt failed (puller-script.ts), in place of BackoffLimitExceeded.
  SourceNotFound: { retryable: false, meaning: 'the repository, its revision or the source path does not exist' },
  AccessDenied: {
    retryable: false,
    meaning: 'the source refused the puller: a gated or private repository, or a token it does not accept',
  },
  SourceForbidden: {
    retryable: false,
    meaning:
      "the store refused the source's credentials, or they may not read the objects (source.s3.credentialsSecret)",
  },
  SourceUnreachable: {
    retryable: false,
    meaning: 'the source did not answer, or sent the puller elsewhere, through every attempt: its endpoint or region',
  },
  WeightsCorrupt: {
    retryable: false,
    meaning:
      'a downloaded file is not what its source states (checksum or ETag); the message names it, no engine starts on it',
  },
  NoSpace: { retryable: false, meaning: 'the volume is full: raise spec.storage.size' },
  PullerImageInvalid: {
    retryable: false,
    meaning: 'the puller image has no huggingface_hub: leave puller.image empty',
  },
  // --- pods (the engine's and the puller's)
  ImagePullBackOff: { retryable: false, meaning: 'the image cannot be pulled' },
  ErrImagePull: { retryable: false, meaning: 'the image cannot be pulled' },
  InvalidImageName: { retryable: false, meaning: 'the image reference is not valid' },
  CreateContainerConfigError: { retryable: false, meaning: "the container's configuration is wrong (a Secret?)" },
  CreateContainerError: { retryable: false, meaning: 'the container runtime cannot create the container' },
  CrashLoopBackOff: { retryable: false, meaning: 'the container keeps exiting; the message has its exit code' },
  OOMKilled: { retryable: false, meaning: 'the container ran out of memory (resources.memory)' },
  EngineArgsRejected: {
    retryable: false,
    meaning: "vLLM refused its command line (exit code 2, argparse's message): fix spec.engine.args",
  },
  MultiAttach: { retryable: true, meaning: 'waiting: the ReadWriteOnce volume is still attached to another node' },
  // --- the engine
  EngineMissing: { retryable: true, meaning: 'the Deployment is gone; the step applies it again' },
  ProgressDeadlineExceeded: { retryable: false, meaning: 'the Deployment controller gave up on the rollout' },
  StartupTimeout: { retryable: false, meaning: 'the engine did not answer /health within engine.startupTimeout' },
  NoReplicas: { retryable: false, meaning: 'the model has 0 replicas: there is no engine to check' },
  EndpointUnknown: { retryable: true, meaning: 'the worker knows no endpoint for the model yet' },
  EndpointInvalid: { retryable: false, meaning: 'a configured endpoint is not an http(s) URL' },
  // --- the load baseline
  InferenceExtensionMissing: {
    retryable: false,
    meaning: 'spec.inferencePool asks for an InferencePool, and the cluster has no inference.networking.k8s.io/v1 CRD',
  },
  MeasurementRefused: {
    retryable: false,
    meaning: "the engine refused the load measurement's requests (4xx): spec.slo.workload does not fit it",
  },
  EngineUnanswered: { retryable: true, meaning: "the engine completed none of the load measurement's requests" },
  // --- teardown
  TeardownIncomplete: { retryable: true, meaning: 'some objects could not be deleted; the message lists each' },
  // --- the workflow's own
  InvalidSpec: { retryable: false, meaning: 'the document is invalid or changes an immutable field' },
  InvalidInput: { retryable: false, meaning: 'an activity or a message was called with inconsistent input (a bug)' },
  UnsupportedInput: { retryable: false, meaning: 'the workflow was started with an input version it does not know' },
  ModelNotFound: { retryable: false, meaning: 'no model of that name was ever served on that cluster' },
  NoRolloutWaiting: {
    retryable: false,
    meaning:
      'ferry rollout approve|abort|undo found nothing to act on: no rollout under way, none waiting for an approval, another candidate, or (undo) no revision before kept',
  },
  ModelDeleting: { retryable: false, meaning: 'the model is being deleted: no update is accepted' },
  ServeFailed: {
    retryable: false,
    meaning: 'a model served as a child workflow failed or ended before Ready; the message has its last error',
  },
  ReadyTimeout: {
    retryable: false,
    meaning: 'the model did not become Ready within the wait given to the call; the model goes on',
  },
  NoCapacity: {
    retryable: false,
    meaning:
      "placement at start: no listed cluster had room for the model's replicas (docs/design/fleet.md); nothing was created",
  },
  ReconcileFailed: { retryable: false, meaning: 'internal: unwinds a reconcile that ended in phase Failed' },
  // --- Temporal's failures, as the workflow classifies them
  Timeout: { retryable: true, meaning: 'an activity timed out (a lost worker, a stuck request)' },
  ActivityFailed: { retryable: true, meaning: 'an activity failed without a type of ours' },
} as const satisfies Record<string, FailureKind>;

/** A failure type of the catalogue; `KubernetesHttp<code>` carries the HTTP status. */
export type FailureType = Exclude<keyof typeof FAILURES, 'KubernetesHttp'> | `KubernetesHttp${number}`;

/** The catalogue's names as constants: `FAILURE.NameConflict === 'NameConflict'`. */
export const FAILURE = Object.fromEntries(Object.keys(FAILURES).map((type) => [type, type])) as {
  readonly [K in keyof typeof FAILURES]: K;
};

function kindOf(type: string): FailureKind | undefined {
  if (/^KubernetesHttp\d+$/.test(type)) return FAILURES.KubernetesHttp;
  return (FAILURES as Record<string, FailureKind>)[type];
}

/** Whether a failure of `type` may succeed on a later attempt; a type outside the catalogue counts as retryable. */
export function isRetryable(type: string): boolean {
  return kindOf(type)?.retryable ?? true;
}

/** The types no retry fixes: the workflows' `nonRetryableErrorTypes`. */
export const NON_RETRYABLE: readonly string[] = Object.keys(FAILURES).filter((type) => !isRetryable(type));

/** The one way Ferry makes a failure: typed, retryable as the catalogue says, details as one object. */
export function failure(
  type: FailureType,
  message: string,
  details?: unknown,
  options: { nextRetryDelayMs?: number } = {},
): ApplicationFailure {
  return ApplicationFailure.create({
    type,
    message,
    nonRetryable: !isRetryable(type),
    ...(details !== undefined ? { details: [details] } : {}),
    ...(options.nextRetryDelayMs !== undefined ? { nextRetryDelay: options.nextRetryDelayMs } : {}),
  });
}
