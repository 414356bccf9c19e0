// The watch's series on the worker's metrics: each watch's age and quiet as gauges, and its ends as a counter that
// takes only what is new since the last reading (the watcher keeps totals).
import type { MetricMeter } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import type { WatchStats } from '../../activities/cluster/model-watcher.js';
import { FerryMetrics } from '../../worker/metrics.js';

/** A meter that records every set and add, by metric name. */
function recordingMeter() {
  const calls: { name: string; op: 'set' | 'add'; value: number; labels: Record<string, unknown> }[] = [];
  const instrument = (name: string) => ({
    set: (value: number, labels = {}) => calls.push({ name, op: 'set', value, labels }),
    add: (value: number, labels = {}) => calls.push({ name, op: 'add', value, labels }),
    record: () => undefined,
  });
  const meter = {
    createCounter: instrument,
    createGauge: instrument,
    createHistogram: instrument,
  } as unknown as MetricMeter;
  return { meter, calls };
}

const stats = (ends: Partial<WatchStats['ends']>, openedAt: number | undefined, lastEventAt: number): WatchStats => ({
  namespace: 'models',
  kind: 'Pod',
  openedAt,
  lastEventAt,
  ends: { renewed: 0, cut: 0, stalled: 0, failed: 0, ...ends },
});

describe('FerryMetrics.setWatches', () => {
  it("sets each watch's age and quiet, and counts its ends once each", () => {
    const { meter, calls } = recordingMeter();
    const metrics = new FerryMetrics(meter);
    const now = 1_000_000;
    metrics.setWatches([stats({ renewed: 2 }, now - 90_000, now - 30_000)], now);
    metrics.setWatches([stats({ renewed: 2, stalled: 1 }, undefined, now - 1_000)], now + 5_000);
    const of = (name: string) =>
      calls.filter((c) => c.name === name).map(({ op, value, labels }) => ({ op, value, labels }));
    const labels = { namespace: 'models', kind: 'Pod' };
    expect(of('ferry_watch_age_seconds')).toEqual([
      { op: 'set', value: 90, labels },
      // Not open (listing or pausing): 0.
      { op: 'set', value: 0, labels },
    ]);
    expect(of('ferry_watch_last_event_seconds')).toEqual([
      { op: 'set', value: 30, labels },
      { op: 'set', value: 6, labels },
    ]);
    // The totals 2 renewed, then 2 renewed and 1 stalled: added as 2, then 1 stalled; nothing twice.
    expect(of('ferry_watch_restarts_total')).toEqual([
      { op: 'add', value: 2, labels: { ...labels, how: 'renewed' } },
      { op: 'add', value: 1, labels: { ...labels, how: 'stalled' } },
    ]);
  });
});

describe('FerryMetrics.setMemory', () => {
  it("sets the process's memory by kind, in bytes", () => {
    const { meter, calls } = recordingMeter();
    new FerryMetrics(meter).setMemory({ rss: 500, heapUsed: 100, heapTotal: 150, external: 20, arrayBuffers: 5 });
    expect(
      calls.filter((c) => c.name === 'ferry_worker_memory_bytes').map(({ value, labels }) => [labels.kind, value]),
    ).toEqual([
      ['rss', 500],
      ['heap_used', 100],
      ['heap_total', 150],
      ['external', 20],
      ['array_buffers', 5],
    ]);
  });
});
