// Kubernetes Events on a model's root ConfigMap, so that `kubectl describe configmap <name>-ferry` and `kubectl get
// events` tell what Ferry did: Ready, Degraded and Failed with the reason, updates accepted, repairs, teardown.
// Deduplicated as kubectl expects: the same type, reason and message on the same object is one Event whose count and
// lastTimestamp grow (its name is derived from them, so a restarted worker continues the count). Best effort: an
// Event that cannot be posted is logged, never retried, and never fails anything.
import { createHash } from 'node:crypto';
import type { CoreV1Event } from '@kubernetes/client-node';
import { rootName } from '../builders/names.js';
import type { Cluster } from './api.js';

export interface ModelEventNote {
  type: 'Normal' | 'Warning';
  /** One CamelCase word, e.g. Ready, Degraded, UpdateAccepted. */
  reason: string;
  message: string;
}

export interface EventSubject {
  namespace: string;
  name: string;
  /** The root ConfigMap's uid (Events without it are not shown by `kubectl describe`). */
  rootUid: string;
}

/** Kubernetes caps an Event's message at 1 KiB. */
const MAX_MESSAGE = 1024;
const EVENT_SOURCE = 'ferry';

export class EventRecorder {
  /** Counts this worker already posted, so a repeat needs no read. */
  private readonly counts = new Map<string, number>();
  private readonly refused = new Set<string>();
  /** Records run one at a time: two of the same Event must not both try to create it. */
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly cluster: Cluster,
    private readonly log: (message: string, meta: Record<string, unknown>) => void,
    private readonly instance: string,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  /** Posts (or counts again) the Event; resolves once it is done or has failed (failures are only logged). */
  record(subject: EventSubject, note: ModelEventNote): Promise<void> {
    this.queue = this.queue.then(() => this.post(subject, note));
    return this.queue;
  }

  private async post(subject: EventSubject, note: ModelEventNote): Promise<void> {
    const message = note.message.length > MAX_MESSAGE ? `${note.message.slice(0, MAX_MESSAGE - 1)}…` : note.message;
    const name = eventName(subject, { ...note, message });
    const key = `${subject.namespace}/${name}`;
    const now = this.clock().toISOString();
    try {
      const known = this.counts.get(key) ?? (await this.existingCount(subject.namespace, name));
      if (known === undefined) {
        await this.cluster.create<CoreV1Event>({
          apiVersion: 'v1',
          kind: 'Event',
          metadata: { name, namespace: subject.namespace },
          involvedObject: {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            name: rootName(subject.name),
            namespace: subject.namespace,
            uid: subject.rootUid,
          },
          type: note.type,
          reason: note.reason,
          message,
          count: 1,
          firstTimestamp: now as unknown as Date,
          lastTimestamp: now as unknown as Date,
          source: { component: EVENT_SOURCE },
          reportingComponent: EVENT_SOURCE,
          reportingInstance: this.instance,
        });
        this.counts.set(key, 1);
        return;
      }
      await this.cluster.mergePatch(
        { apiVersion: 'v1', kind: 'Event', name, namespace: subject.namespace },
        { count: known + 1, lastTimestamp: now },
      );
      this.counts.set(key, known + 1);
    } catch (err) {
      this.counts.delete(key);
      // Said once per namespace: a worker without the right to post Events still serves models.
      if (this.refused.has(subject.namespace)) return;
      this.refused.add(subject.namespace);
      this.log('cannot post a Kubernetes Event (further failures in this namespace are not logged)', {
        namespace: subject.namespace,
        model: subject.name,
        reason: note.reason,
        error: (err as Error).message ?? String(err),
      });
    }
  }

  private async existingCount(namespace: string, name: string): Promise<number | undefined> {
    const found = await this.cluster.get<CoreV1Event>({ apiVersion: 'v1', kind: 'Event', name, namespace });
    return found ? (found.count ?? 1) : undefined;
  }
}

/** `<name>-ferry.<16 hex>`: one name per object, type, reason and message. */
export function eventName(subject: EventSubject, note: ModelEventNote): string {
  const hash = createHash('sha256')
    .update(`${subject.rootUid}\n${note.type}\n${note.reason}\n${note.message}`)
    .digest('hex')
    .slice(0, 16);
  return `${rootName(subject.name)}.${hash}`;
}
