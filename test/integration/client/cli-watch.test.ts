// `ferry list` and `ferry status` with -w, --watch-only, -l and -o wide, spawned as `node bin/ferry.js` against the
// local Temporal dev server and a Ferry worker (createWorker) with stub activities on a cluster of its own.
import { describe, expect, it } from 'vitest';
import type { ModelSummary } from '../../../client/list-models.js';
import { runFerry, spawnFerry, writeDoc } from '../../support/ferry-worker.js';
import { useFerryWorker } from '../../support/fixtures.js';
import { StubActivities } from '../../support/stub-activities.js';

const { ferry } = useFerryWorker(new StubActivities());

/** Serves a model of namespace models with `labels` and waits until it is Ready; its name. */
async function served(labels: Record<string, string>): Promise<string> {
  const doc = ferry.doc((d) => (d.metadata.labels = labels));
  const run = await runFerry(['serve', '-f', writeDoc(doc), '--wait', '--timeout', '1m']);
  expect(run.code, run.stderr).toBe(0);
  return doc.metadata.name as string;
}

describe('ferry list -w and status -w', () => {
  it('list -w -l -o wide: the matching models, then a row per change, a new model and a deleted one; Ctrl-C is 130', async () => {
    const chat = await served({ team: 'chat', tier: 'gold' });
    const search = await served({ team: 'search' });
    // -l matches metadata.labels: one of the two, and a bad selector is bad usage before anything connects.
    const once = await runFerry([
      'list',
      '-n',
      'models',
      '--cluster',
      ferry.cluster,
      '-l',
      'team in (chat),tier',
      '-o',
      'json',
    ]);
    expect(once.code, once.stderr).toBe(0);
    expect(JSON.parse(once.stdout) as ModelSummary[]).toEqual([
      expect.objectContaining({ name: chat, labels: { team: 'chat', tier: 'gold' } }),
    ]);
    const notSearch = await runFerry([
      'list',
      '-n',
      'models',
      '--cluster',
      ferry.cluster,
      '-l',
      'team!=search',
      '-o',
      'name',
    ]);
    expect(notSearch.stdout).toBe(`servedmodel/${chat}\n`);
    const bad = await runFerry(['list', '-l', 'team in (chat']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^error: -l\/--selector: a "\(" without its "\)" in "team in \(chat"\n/);

    const watch = spawnFerry([
      'list',
      '-n',
      'models',
      '--cluster',
      ferry.cluster,
      '-l',
      'team=chat',
      '-w',
      '-o',
      'wide',
    ]);
    const row = (name: string, rest: string) => new RegExp(`^${name} +${ferry.cluster} +${rest}`, 'm');
    // PHASE is as wide as the longest phase, so that later rows stay in their columns.
    await watch.waitForOutput(/^NAME +CLUSTER +PHASE {9}READY +GEN +ENDPOINT +AGE +MODEL +SOURCE +REASON$/m);
    await watch.waitForOutput(row(chat, 'Ready +1/1 +1/1 +http://\\S+ +\\d+s +\\S+ +huggingface:Qwen/'));

    // A change of replicas: rows until it is Ready at 2/2, generation 2.
    const scaled = writeDoc(
      ferry.doc((d) => ((d.metadata.labels = { team: 'chat', tier: 'gold' }), (d.spec.replicas = 2)), chat),
    );
    expect((await runFerry(['update', '-f', scaled, '--wait'])).code).toBe(0);
    await watch.waitForOutput(row(chat, 'Ready +2/2 +2/2 '));
    // A new model that matches is a row; one that does not is not.
    const newcomer = await served({ team: 'chat' });
    await served({ team: 'other' });
    await watch.waitForOutput(row(newcomer, 'Ready +1/1 +1/1 '));
    // A deleted model leaves the list: its last row says Deleted.
    expect((await runFerry(['delete', chat, '-n', 'models', '--cluster', ferry.cluster, '--wait'])).code).toBe(0);
    await watch.waitForOutput(row(chat, 'Deleted +- +- '));

    watch.child.kill('SIGINT');
    const done = await watch.exited;
    expect(done.code).toBe(130);
    expect(done.stderr).toMatch(/^interrupted: stopped waiting \(the model is not affected\)$/m);
    expect(done.stdout).not.toContain(search);
    // The header once, and each change once: no repeated rows while nothing changed.
    const lines = done.stdout.trimEnd().split('\n');
    expect(lines.filter((l) => l.startsWith('NAME '))).toHaveLength(1);
    expect(new Set(lines).size).toBe(lines.length);
  }, 120_000);

  it('status -w prints the status, then a line with ready replicas per change, and ends at --timeout with 0', async () => {
    const name = await served({ team: 'chat' });
    const watch = spawnFerry(['status', name, '-n', 'models', '--cluster', ferry.cluster, '-w', '--timeout', '12s']);
    await watch.waitForOutput(/^ {2}phase: +Ready$/m);
    const scaled = writeDoc(ferry.doc((d) => (d.spec.replicas = 3), name));
    expect((await runFerry(['update', '-f', scaled, '--wait'])).code).toBe(0);
    await watch.waitForOutput(/^\d\d:\d\d:\d\d {2}Ready +generation 2 {2}ready 3\/3 {2}http:\/\//m);
    const done = await watch.exited;
    expect(done.code).toBe(0);
    expect(done.stderr).toBe('');
    // The Ready at generation 1 was shown as the status, not again as a line.
    expect(done.stdout).not.toMatch(/generation 1 /);
  }, 60_000);

  it('list --watch-only -o json prints only what changes, one model a line', async () => {
    const before = await served({ team: 'watch-only' });
    const watch = spawnFerry([
      'list',
      '-n',
      'models',
      '--cluster',
      ferry.cluster,
      '-l',
      'team=watch-only',
      '--watch-only',
      '-o',
      'json',
      '--timeout',
      '30s',
    ]);
    // Time for the first read, which prints nothing.
    await new Promise((r) => setTimeout(r, 3_000));
    const after = await served({ team: 'watch-only' });
    await watch.waitForOutput(new RegExp(`"name":"${after}".*"phase":"Ready"`));
    watch.child.kill('SIGINT');
    const done = await watch.exited;
    const models = done.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as ModelSummary);
    expect(models.map((m) => m.name)).not.toContain(before);
    expect(models.at(-1)).toMatchObject({ name: after, phase: 'Ready', status: { readyReplicas: 1 } });
  }, 90_000);
});
