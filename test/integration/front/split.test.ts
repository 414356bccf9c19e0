// The front's share of the requests between revisions (activities/builders/front.ts; docs/design/rollout.md, section
// 3), checked against a real HAProxy (Debian's) and two engine stand-ins on loopback, with the configuration a model's
// front is deployed with (front-objects.ts) moved onto loopback: each revision's share counted by the revision that
// each response names, and a revision that stops answering costing no request; and the front's own counts by
// revision, on which a rollout's health gate judges the candidate.
import { afterEach, describe, expect, it } from 'vitest';
import { frontConfigFor } from '../../../activities/builders/front-objects.js';
import type { RevisionShare } from '../../../workflows/contract/index.js';
import { freePort } from '../../support/e2e.js';
import { fixtureModel } from '../../unit/fixtures.js';
import { frontServers } from '../../../activities/scaling/load.js';
import { judgeFront } from '../../../workflows/steps/health-gate.js';
import { ask, loopbackServers, startEngine, startFront, stopAll } from './front-harness.js';

afterEach(stopAll);

const model = fixtureModel('front');

/** A front for `model` with `shares`, each revision a stand-in of its own; returns the front's URL and the engines. */
async function frontOf(shares: RevisionShare[]) {
  const ports = Object.fromEntries(await Promise.all(shares.map(async (s) => [s.revision, await freePort()])));
  const engines = Object.fromEntries(
    await Promise.all(shares.map(async (s) => [s.revision, await startEngine(ports[s.revision] as number)])),
  );
  // The deployed configuration, with its servers moved onto loopback: the same names and weights.
  const deployed = frontConfigFor(model, {}, shares);
  const { url, metricsPort } = await startFront(loopbackServers(shares, ports), { holdSeconds: 10 }, model);
  /** What the front's exporter counts by revision, as readStatus reads it for a health gate. */
  const counted = async () => frontServers(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text());
  return { url, engines, deployed, counted };
}

/** Sends `n` completions `concurrency` at a time; counts the answers by status and by the revision named. */
async function send(url: string, n: number, concurrency: number) {
  const revisions: Record<string, number> = {};
  const statuses: Record<number, number> = {};
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        next++;
        const answer = await ask(url, '/v1/completions', { model: 'm', prompt: 'a b', max_tokens: 1 });
        statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
        const revision = answer.revision ?? 'none';
        revisions[revision] = (revisions[revision] ?? 0) + 1;
      }
    }),
  );
  return { revisions, statuses };
}

describe("the front's share of the requests between revisions", () => {
  it.each([
    [90, 10],
    [50, 50],
  ])(
    'sends %i of every 100 requests to the current revision and %i to the candidate, each naming its revision',
    async (a, b) => {
      const shares: RevisionShare[] = [
        { revision: 'r3', slot: 'a', weight: a },
        { revision: 'r4', slot: 'b', weight: b },
      ];
      const { url, deployed, counted } = await frontOf(shares);
      expect(deployed).toContain(
        `server r3 ${model.metadata.name}-engine.${model.metadata.namespace}.svc:8000 weight ${a}`,
      );
      expect(deployed).toContain(`server r4 ${model.metadata.name}-b.${model.metadata.namespace}.svc:8000 weight ${b}`);
      const n = 400;
      const { revisions, statuses } = await send(url, n, 4);
      expect(statuses).toEqual({ 200: n });
      expect((revisions.r3 ?? 0) + (revisions.r4 ?? 0)).toBe(n);
      // Within 10 % of the share (HAProxy's weighted round robin is exact per round of 100; concurrency blurs it little).
      expect(Math.abs((revisions.r4 ?? 0) / n - b / 100)).toBeLessThanOrEqual(0.1);
      expect(Math.abs((revisions.r3 ?? 0) / n - a / 100)).toBeLessThanOrEqual(0.1);
      // The front's own counts agree, and a health gate passes the candidate on them.
      const counts = await counted();
      expect(counts.r3).toMatchObject({ requests: revisions.r3, answered: revisions.r3, failed: 0 });
      expect(counts.r4).toMatchObject({ requests: revisions.r4, answered: revisions.r4, failed: 0 });
      expect(counts.r4!.averageMs).toBeGreaterThan(0);
      expect(judgeFront({ pods: 1, revisions: counts }, 'r4', 'r3')).toMatchObject({ result: 'Passed' });
    },
  );

  it('names the one revision when there is no rollout', async () => {
    const { url } = await frontOf([{ revision: 'r1', slot: 'a', weight: 100 }]);
    const { revisions, statuses } = await send(url, 20, 2);
    expect(statuses).toEqual({ 200: 20 });
    expect(revisions).toEqual({ r1: 20 });
  });

  it('costs no request when a revision stops answering: its share goes to the other', async () => {
    const shares: RevisionShare[] = [
      { revision: 'r1', slot: 'a', weight: 50 },
      { revision: 'r2', slot: 'b', weight: 50 },
    ];
    const { url, engines, counted } = await frontOf(shares);
    const before = await send(url, 40, 2);
    expect(before.statuses).toEqual({ 200: 40 });
    expect(before.revisions.r2).toBeGreaterThan(0);
    await engines.r2!.stop();
    // Its connections are refused: each is tried again on the other revision.
    const after = await send(url, 100, 4);
    expect(after.statuses).toEqual({ 200: 100 });
    expect(after.revisions).toEqual({ r1: 100 });
    // No client saw it, but the front counted each refused connection against r2: its health gate fails it.
    const counts = await counted();
    expect(counts.r2!.failed).toBeGreaterThan(0);
    const verdict = judgeFront({ pods: 1, revisions: counts }, 'r2', 'r1');
    expect(verdict).toMatchObject({ result: 'Failed' });
    expect(verdict!.message).toMatch(
      /^more than 1 % of r2's requests failed, through the front r2: \d+ of \d+ requests failed/,
    );
  });
});
