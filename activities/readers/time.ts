// Times as Kubernetes writes them (a Date from the client, a string from a watch), as epoch milliseconds. Pure.
import type { CoreV1Event } from '@kubernetes/client-node';

/** Epoch ms of a timestamp; 0 when unset. */
export const timeOf = (t: Date | string | undefined): number => (t ? new Date(t).getTime() : 0);

/** When an Event last happened: its last, own, first or creation time, whichever is set first. */
export const eventTime = (e: CoreV1Event): number =>
  timeOf(e.lastTimestamp ?? e.eventTime ?? e.firstTimestamp ?? e.metadata?.creationTimestamp);
