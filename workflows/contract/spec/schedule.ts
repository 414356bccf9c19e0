// The fewest replicas by time window (`spec.scaling.schedule`; docs/design/scaling.md): each window starts at the
// times its cron names, in its time zone, and holds for `for`; the floor at a moment is the highest of `minReplicas`
// and every window open then. Pure (croner keeps the calendar: time zones, daylight saving): it is bundled into
// workflow code, where the clock is the workflow's.
import { Cron } from 'croner';
import { z } from 'zod';
import { parseDuration } from './quantities.js';
import { duration, jsonRule, rules, strict } from './rules.js';
import { quote } from './text.js';

/** The most windows a model's schedule lists. */
const MAX_WINDOWS = 10;
/** Five fields separated by spaces, as the JSON Schema says it; what each field holds, only the parser checks. */
const CRON_SHAPE = /^\s*\S+(?:\s+\S+){4}\s*$/u;
/** An IANA zone's shape (`Europe/Berlin`, `UTC`, `Etc/GMT+5`); whether the zone exists, only the parser checks. */
const TIME_ZONE_SHAPE = /^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/u;

function cronOf(pattern: string, timeZone?: string): Cron {
  return new Cron(pattern, { paused: true, ...(timeZone ? { timezone: timeZone } : {}) });
}

function cronProblem(value: string): string | { message: string; rule: 'cron' } | undefined {
  if (!CRON_SHAPE.test(value)) {
    return `must be 5 fields, minute hour day-of-month month day-of-week, like "0 8 * * 1-5", got ${quote(value)}`;
  }
  try {
    cronOf(value).nextRun(new Date(0));
    return undefined;
  } catch (err) {
    const why = (err as Error).message.replace(/^CronPattern: /u, '');
    return { message: `is not a schedule cron can run (${why}), got ${quote(value)}`, rule: 'cron' };
  }
}

function timeZoneProblem(value: string): string | { message: string; rule: 'time-zone' } | undefined {
  const problem = `must be an IANA time zone like Europe/Berlin or UTC, got ${quote(value)}`;
  if (!TIME_ZONE_SHAPE.test(value)) return problem;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: value });
    return undefined;
  } catch {
    return { message: problem, rule: 'time-zone' };
  }
}

const scheduleWindowSchema = strict({
  cron: rules(z.string({ error: 'must be a cron schedule like "0 8 * * 1-5"' }), cronProblem)
    .meta(jsonRule(CRON_SHAPE))
    .describe(
      'When the window opens: minute hour day-of-month month day-of-week, like "0 8 * * 1-5" (08:00 on weekdays).',
    ),
  timeZone: rules(z.string({ error: 'must be an IANA time zone like Europe/Berlin' }), timeZoneProblem)
    .meta(jsonRule(TIME_ZONE_SHAPE))
    .default('UTC')
    .describe('The time zone the cron reads its hours in, like Europe/Berlin; daylight saving is followed.'),
  minReplicas: z
    .number({ error: 'must be a whole number of replicas' })
    .int('must be a whole number of replicas')
    .min(1, 'must be at least 1')
    .describe('The fewest engine pods while the window is open; above scaling.minReplicas, at most maxReplicas.'),
  for: duration('10h').describe('How long the window stays open from each time the cron names, like 10h.'),
});

export const scheduleSchema = z
  .array(scheduleWindowSchema, {
    error: 'must be a list of windows like {cron: "0 8 * * 1-5", minReplicas: 2, for: 10h}',
  })
  .min(1, 'must list at least one window; leave schedule out for none')
  .max(MAX_WINDOWS, `must list at most ${MAX_WINDOWS} windows`)
  .describe('The fewest replicas by time window: while a window is open, scaling does not go below its minReplicas.');

export type ScheduleWindow = z.output<typeof scheduleWindowSchema>;

/** The floor now, and when it next changes and to what (none within the horizon: `next` unset). */
export interface ScheduledFloor {
  minReplicas: number;
  next?: { at: number; minReplicas: number };
}

/**
 * How many times one answer may ask the calendar for a cron's next time: a dense cron (every minute, windows that
 * overlap) would otherwise take seconds. Past it, the floor is known to hold until where the asking stopped, and the
 * workflow looks again then.
 */
const CALENDAR_BUDGET = 300;

/**
 * One window at `t`: open (until `until`) or closed (until the next opening, `until`; none: never again). An open
 * window whose overlapping occurrences outlast the budget is open at least until `until`.
 */
function windowAt(window: ScheduleWindow, t: number, budget: { calls: number }): { open: boolean; until?: number } {
  const cron = cronOf(window.cron, window.timeZone);
  const length = parseDuration(window.for);
  const nextAfter = (ms: number) => {
    budget.calls--;
    return cron.nextRun(new Date(ms))?.getTime();
  };
  budget.calls--;
  const started = cron.previousRuns(1, new Date(t + 1))[0]?.getTime();
  if (started !== undefined && t < started + length) {
    // Open: until the last of the occurrences that overlap or touch it has ended.
    let end = started + length;
    for (let next = nextAfter(started); next !== undefined && next <= end && budget.calls > 0; next = nextAfter(next)) {
      end = Math.max(end, next + length);
    }
    return { open: true, until: end };
  }
  const opens = nextAfter(t);
  return opens === undefined ? { open: false } : { open: false, until: opens };
}

/** The floor at `t` from each window's state. */
const floorOf = (minReplicas: number, windows: readonly ScheduleWindow[], states: { open: boolean }[]) =>
  Math.max(minReplicas, ...windows.filter((_, i) => states[i]!.open).map((w) => w.minReplicas));

/** The fewest replicas at `nowMs` under `schedule`, and the next moment that changes. */
export function scheduledFloor(
  minReplicas: number,
  schedule: readonly ScheduleWindow[] | undefined,
  nowMs: number,
): ScheduledFloor {
  if (!schedule?.length) return { minReplicas };
  const budget = { calls: CALENDAR_BUDGET };
  let states = schedule.map((w) => windowAt(w, nowMs, budget));
  const floor = floorOf(minReplicas, schedule, states);
  for (;;) {
    const changes = states.map((s) => s.until).filter((u): u is number => u !== undefined);
    if (!changes.length) return { minReplicas: floor };
    // Each window keeps its state until its `until`: the floor holds until the first of them.
    const t = Math.min(...changes);
    if (budget.calls <= 0) return { minReplicas: floor, next: { at: t, minReplicas: floor } };
    states = schedule.map((w) => windowAt(w, t, budget));
    const then = floorOf(minReplicas, schedule, states);
    if (then !== floor) return { minReplicas: floor, next: { at: t, minReplicas: then } };
  }
}
