// spec.scaling.schedule: what the parser accepts and refuses, and the floor at a moment and its next change — by
// examples (a weekday window in Berlin across daylight saving, overlapping windows) and, for random windows, against
// a count made minute by minute from every time the cron names.
import { Cron } from 'croner';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  parseServedModel,
  safeParseServedModel,
  scheduledFloor,
  type ScheduleWindow,
  type ServedModelInput,
} from '../../workflows/contract/index.js';
import { scheduleStatus } from '../../workflows/steps/schedule.js';
import { initialStatus } from '../../workflows/status/transitions.js';
import { formatStatus } from '../../client/cli/format.js';
import { minimalHf } from './fixtures.js';

const withScaling = (scaling: Record<string, unknown>): ServedModelInput => ({
  ...minimalHf,
  spec: { ...minimalHf.spec, scaling: { minReplicas: 1, maxReplicas: 4, targetConcurrency: 2, ...scaling } },
});
const issuesOf = (doc: unknown) => {
  const result = safeParseServedModel(doc);
  return result.ok ? [] : result.issues;
};
const at = (iso: string) => Date.parse(iso);
const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

const weekdays: ScheduleWindow = { cron: '0 8 * * 1-5', timeZone: 'Europe/Berlin', minReplicas: 2, for: '10h' };

describe('spec.scaling.schedule', () => {
  it('fills the time zone and parses again to itself', () => {
    const model = parseServedModel(withScaling({ schedule: [{ cron: '0 8 * * 1-5', minReplicas: 2, for: '10h' }] }));
    expect(model.spec.scaling?.schedule).toEqual([
      { cron: '0 8 * * 1-5', timeZone: 'UTC', minReplicas: 2, for: '10h' },
    ]);
    expect(parseServedModel(model)).toEqual(model);
  });

  it.each([
    [{ cron: '0 8 * *', minReplicas: 2, for: '1h' }, 'cron', '5 fields'],
    [{ cron: '0 0 8 * * *', minReplicas: 2, for: '1h' }, 'cron', '5 fields'],
    [{ cron: '61 8 * * *', minReplicas: 2, for: '1h' }, 'cron', 'minute'],
    [{ cron: '0 8 * * *', timeZone: 'Mars/Olympus', minReplicas: 2, for: '1h' }, 'timeZone', 'IANA time zone'],
    [{ cron: '0 8 * * *', timeZone: 'Berlin time', minReplicas: 2, for: '1h' }, 'timeZone', 'IANA time zone'],
    [{ cron: '0 8 * * *', minReplicas: 1, for: '1h' }, 'minReplicas', 'above scaling.minReplicas (1)'],
    [{ cron: '0 8 * * *', minReplicas: 5, for: '1h' }, 'minReplicas', 'at most maxReplicas (4)'],
    [{ cron: '0 8 * * *', minReplicas: 2, for: '0s' }, 'for', 'positive duration'],
    [{ cron: '0 8 * * *', minReplicas: 2 }, 'for', 'a duration like 10h'],
    [{ cron: '0 8 * * *', minReplicas: 2, for: '1h', days: 5 }, 'days', ''],
  ])('refuses the window %j at its %s', (window, field, words) => {
    const issues = issuesOf(withScaling({ schedule: [window] }));
    const path = `spec.scaling.schedule[0].${field}`;
    expect(issues.map((i) => i.path)).toContain(path);
    expect(issues.find((i) => i.path === path)?.message).toContain(words);
  });

  it('refuses an empty list and more than ten windows', () => {
    expect(issuesOf(withScaling({ schedule: [] }))[0]?.message).toContain('at least one window');
    const many = Array.from({ length: 11 }, () => ({ cron: '0 8 * * *', minReplicas: 2, for: '1h' }));
    expect(issuesOf(withScaling({ schedule: many }))[0]?.message).toContain('at most 10 windows');
  });
});

describe('scheduledFloor', () => {
  it('without a schedule: minReplicas, and no change ahead', () => {
    expect(scheduledFloor(1, undefined, at('2026-12-05T10:00:00Z'))).toEqual({ minReplicas: 1 });
  });

  it('a weekday window in Berlin: opens at 08:00 local on Monday, closes at 18:00, in winter and in summer', () => {
    // Saturday 2026-12-05: closed until Monday 08:00 CET (07:00 UTC).
    expect(scheduledFloor(1, [weekdays], at('2026-12-05T10:00:00Z'))).toEqual({
      minReplicas: 1,
      next: { at: at('2026-12-07T07:00:00Z'), minReplicas: 2 },
    });
    // Monday at 07:00 UTC sharp it is open, until 18:00 CET.
    expect(scheduledFloor(1, [weekdays], at('2026-12-07T07:00:00Z'))).toEqual({
      minReplicas: 2,
      next: { at: at('2026-12-07T17:00:00Z'), minReplicas: 1 },
    });
    // The Monday after the clocks went forward (2027-03-28): 08:00 CEST is 06:00 UTC.
    expect(scheduledFloor(1, [weekdays], at('2027-03-27T12:00:00Z')).next).toEqual({
      at: at('2027-03-29T06:00:00Z'),
      minReplicas: 2,
    });
    // Friday evening: closed until Monday, not Saturday.
    expect(iso(scheduledFloor(1, [weekdays], at('2026-12-11T17:00:00Z')).next?.at)).toBe('2026-12-14T07:00:00.000Z');
  });

  it('overlapping windows: the highest open one counts; occurrences that overlap make one long window', () => {
    const busy: ScheduleWindow = { cron: '0 12 * * *', timeZone: 'UTC', minReplicas: 3, for: '1h' };
    const daily = { ...weekdays, timeZone: 'UTC' };
    expect(scheduledFloor(1, [daily, busy], at('2026-12-07T12:30:00Z'))).toEqual({
      minReplicas: 3,
      next: { at: at('2026-12-07T13:00:00Z'), minReplicas: 2 },
    });
    // Every hour for 90 minutes: open without a break, whatever the time.
    const hourly: ScheduleWindow = { cron: '0 * * * *', timeZone: 'UTC', minReplicas: 2, for: '90m' };
    const floor = scheduledFloor(1, [hourly], at('2026-12-07T12:30:00Z'));
    expect(floor.minReplicas).toBe(2);
    // No change in sight: a look again later is asked for, the floor the same.
    expect(floor.next?.minReplicas).toBe(2);
    expect(scheduleStatus(floor)).toEqual({ minReplicas: 2 });
  });

  it('agrees, minute by minute, with a count from every time the cron names', () => {
    const minute = 60_000;
    const window = fc.record({
      cron: fc.oneof(
        fc.tuple(fc.integer({ min: 0, max: 59 }), fc.integer({ min: 0, max: 23 })).map(([m, h]) => `${m} ${h} * * *`),
        fc.tuple(fc.integer({ min: 0, max: 59 }), fc.integer({ min: 0, max: 6 })).map(([m, d]) => `${m} */3 * * ${d}`),
        fc.integer({ min: 5, max: 59 }).map((m) => `*/${m} * * * *`),
      ),
      timeZone: fc.constantFrom('UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Kolkata'),
      minReplicas: fc.integer({ min: 2, max: 5 }),
      for: fc.integer({ min: 1, max: 30 * 60 }).map((m) => `${m}m`),
    });
    fc.assert(
      fc.property(
        fc.array(window, { minLength: 1, maxLength: 3 }),
        fc.integer({ min: 0, max: 2 * 365 * 24 * 60 }),
        (windows, offset) => {
          const start = at('2026-01-01T00:00:00Z') + offset * minute;
          // Every opening from 31 hours before to a day after, and the floor each minute from them alone.
          const openings = windows.map((w) => {
            const cron = new Cron(w.cron, { timezone: w.timeZone, paused: true });
            const times: number[] = [];
            for (
              let t = cron.nextRun(new Date(start - 31 * 60 * minute));
              t && t.getTime() < start + 1441 * minute;
              t = cron.nextRun(t)
            ) {
              times.push(t.getTime());
            }
            return times;
          });
          const floorAt = (t: number) =>
            Math.max(
              1,
              ...windows.map((w, i) => {
                const length = Number(w.for.slice(0, -1)) * minute;
                return openings[i]!.some((s) => s <= t && t < s + length) ? w.minReplicas : 0;
              }),
            );
          const found = scheduledFloor(1, windows, start);
          expect(found.minReplicas).toBe(floorAt(start));
          // The next change: the first minute the count differs, when it is within the day looked at.
          let change: number | undefined;
          for (let t = start + minute - (start % minute); t < start + 1440 * minute; t += minute) {
            if (floorAt(t) !== found.minReplicas) {
              change = t;
              break;
            }
          }
          if (found.next?.minReplicas === found.minReplicas) {
            // A dense schedule outran the calendar budget: the floor holds at least until it looks again.
            expect(found.next.at).toBeGreaterThan(start);
            if (change !== undefined) expect(change).toBeGreaterThanOrEqual(found.next.at);
          } else if (change !== undefined) expect(found.next).toEqual({ at: change, minReplicas: floorAt(change) });
          else if (found.next) expect(found.next.at).toBeGreaterThanOrEqual(start + 1440 * minute - minute);
        },
      ),
      // FERRY_SCHEDULE_RUNS=1500 for a deeper run (about 40 s here).
      { numRuns: Number(process.env.FERRY_SCHEDULE_RUNS ?? 60) },
    );
    // A few seconds on a quiet machine; a loaded CI machine took more than the default 5 s.
  }, 60_000);
});

describe('ferry status', () => {
  it('shows the floor now and when it next changes', () => {
    const model = parseServedModel(withScaling({ schedule: [weekdays] }));
    const now = at('2026-12-05T10:00:00Z');
    const floor = scheduledFloor(1, model.spec.scaling!.schedule, now);
    const status = {
      ...initialStatus(model, new Date(now).toISOString()),
      phase: 'Ready' as const,
      scaling: {
        replicas: 1,
        minReplicas: 1,
        maxReplicas: 4,
        targetConcurrency: 2,
        decisions: 0,
        schedule: scheduleStatus(floor),
      },
    };
    expect(formatStatus(status, new Date(now))).toMatch(
      / schedule: +at least 1 now; at least 2 from 2026-12-07T07:00:00.000Z \(in 45h\)/,
    );
  });
});
