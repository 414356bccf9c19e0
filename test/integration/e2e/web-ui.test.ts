// The Temporal Web UI's page of a served model, read as a person reads it: in headless Chromium (Debian's package,
// which `deploy/local/install.sh` installs with Temporal), driven by puppeteer-core. It asserts on the text and on
// where words sit on the screen, never on pixels. Each page's screenshot is left in the temp folder to look at.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import puppeteer, { type Browser, type Frame, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  describeBaseline,
  formatDuration,
  type ModelStatus,
  type TimelineEntry,
  workflowIdFor,
} from '../../../workflows/contract/index.js';
import { summarizeStatus } from '../../../workflows/status/summary.js';
import { runFerry, writeDoc } from '../../support/ferry-worker.js';
import { readLocalEnv } from '../../support/local-env.js';
import type { Doc } from '../../support/workflow-harness.js';
import { expectOk, ferryJson, uniqueCluster } from '../../support/e2e.js';
import { RESTRICTED, useNamespace, useWorkerProcesses } from '../../support/fixtures.js';

// The browser's globals that the functions run in the page use; this project's TypeScript knows only Node's.
interface PageText {
  data: string;
}
interface PageRect {
  left: number;
  right: number;
  top: number;
  height: number;
}
declare const document: {
  querySelector(selector: string): { innerText: string } | null;
  querySelectorAll(selector: string): ArrayLike<{ innerText: string }>;
  createTreeWalker(root: unknown, whatToShow: number): { nextNode(): PageText | null };
  createRange(): {
    setStart(node: PageText, offset: number): void;
    setEnd(node: PageText, offset: number): void;
    getBoundingClientRect(): PageRect;
  };
};
declare const location: { pathname: string };
declare const NodeFilter: { SHOW_TEXT: number };

const chromium = process.env.FERRY_CHROMIUM ?? '/usr/bin/chromium';
// What works as root on a machine with no network beyond the loopback: no sandbox, GPU, QUIC or calls home.
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const kube = useNamespace('e2e-webui', RESTRICTED);
const startWorkerProcess = useWorkerProcesses();
const cluster = uniqueCluster('webui');
const ui = webUi();
let browser: Browser | undefined;
let profile: string | undefined;
let connection: Connection | undefined;
/** The model every test here looks at: served once, Ready. */
let served: ModelStatus;
const workflowId = () => workflowIdFor({ cluster, namespace: kube.ns, name: 'webui' });

beforeAll(async () => {
  if (!existsSync(chromium))
    throw new Error(`no Chromium at ${chromium}: \`bash deploy/local/install.sh browser\` installs Debian's chromium`);
  await startWorkerProcess(cluster);
  profile = mkdtempSync(join(tmpdir(), 'ferry-chromium-'));
  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    userDataDir: profile,
    args: CHROMIUM_ARGS,
  });
  connection = await Connection.connect({ address: readLocalEnv().TEMPORAL_ADDRESS });
  served = await serve('webui');
}, 360_000);

afterAll(async () => {
  await browser?.close();
  await connection?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

async function serve(name: string): Promise<ModelStatus> {
  const doc: Doc = {
    apiVersion: 'ferry.dev/v1alpha1',
    kind: 'ServedModel',
    metadata: {
      name,
      namespace: kube.ns,
      // A download of 2 s, so that step's line shows a duration of seconds.
      labels: { 'sim.ferry.dev/load-delay-seconds': '1', 'sim.ferry.dev/complete-delay': '2s' },
    },
    spec: {
      cluster,
      source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } },
      // A goal the stand-in meets up to --max-num-seqs (2; test/integration/e2e/baseline.test.ts says why): the load
      // baseline is measured in a second or two and has its line in the details.
      engine: {
        startupTimeout: '3m',
        args: ['--max-num-seqs=2'],
        env: [{ name: 'FERRY_SIM_TOKEN_DELAY_MS', value: '20' }],
      },
      puller: { deadline: '5m' },
      slo: { ttft: '300ms', itl: '100ms', workload: { promptTokens: 16, outputTokens: 32 }, maxConcurrency: 4 },
    },
  };
  expectOk(await runFerry(['serve', '-f', writeDoc(doc), '--wait', '--timeout', '4m']), 'ferry serve');
  return await ferryJson<ModelStatus>(['status', name, '-n', kube.ns, '--cluster', cluster]);
}

/** Opens one tab (`user-metadata`, `query`) of the model's workflow page as a person does: the page, then the tab. */
async function openTab(tab: string): Promise<Page> {
  const page = await browser!.newPage();
  await page.setViewport({ width: 1400, height: 1000 });
  await page.goto(`${ui}/namespaces/default/workflows/${encodeURIComponent(workflowId())}`, {
    waitUntil: 'domcontentloaded',
  });
  const link = await page.waitForSelector(`a[href$="/${tab}"]`);
  await link!.click();
  await page.waitForFunction((t) => location.pathname.endsWith(`/${t}`), {}, tab);
  return page;
}

/**
 * The frame the UI renders the current details' markdown in, once it shows `until`. The UI replaces the iframe when
 * the details change, so a frame that detaches (or has none yet) is looked up again.
 */
async function currentDetails(page: Page, until: string): Promise<Frame> {
  const end = Date.now() + 30_000;
  for (;;) {
    const element = await page.waitForSelector('iframe#user-metadata-current-details');
    const frame = await element?.contentFrame();
    const shown = frame
      ? await frame
          .waitForFunction(
            (text) => document.querySelector('main')?.innerText.includes(text),
            { timeout: 5_000 },
            until,
          )
          .then(
            () => true,
            () => false,
          )
      : false;
    if (shown) return frame!;
    if (Date.now() > end) throw new Error(`the current details did not show ${JSON.stringify(until)} within 30 s`);
  }
}

/** A screenshot in the temp folder, for a person to look at; its path goes into failure messages. */
async function shot(page: Page, name: string): Promise<string> {
  const path = join(tmpdir(), `ferry-web-ui-${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** The rendered lines of a markdown frame, trimmed, empty ones left out. */
const linesOf = async (frame: Frame): Promise<string[]> =>
  (await frame.evaluate(() => document.querySelector('main')!.innerText))
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);

/**
 * Pixels on the screen between the end of `word`, where a rendered text starts with it, and the next visible
 * character: a space's width when they read as two words, 0 when they run together (`download1Succeeded`), Infinity
 * when that character is on the next line, undefined when no text starts with `word`.
 */
const gapAfter = (frame: Frame, word: string): Promise<number | undefined> =>
  frame.evaluate((w) => {
    const walker = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
    let node = walker.nextNode();
    while (node && !node.data.trimStart().startsWith(w)) node = walker.nextNode();
    if (!node) return undefined;
    const range = document.createRange();
    const box = (text: PageText, from: number, to: number): PageRect => {
      range.setStart(text, from);
      range.setEnd(text, to);
      return range.getBoundingClientRect();
    };
    const start = node.data.indexOf(w);
    const end = box(node, start, start + w.length);
    for (let text: PageText | null = node, offset = start + w.length; text; text = walker.nextNode(), offset = 0) {
      const at = text.data.slice(offset).search(/\S/);
      if (at < 0) continue;
      const next = box(text, offset + at, offset + at + 1);
      return Math.abs(next.top - end.top) > end.height / 2 ? Infinity : next.left - end.right;
    }
    return Infinity;
  }, word);

/** `download (gen 1): Succeeded in 2.6s`: how a finished timeline entry's line starts, before its detail. */
const entryHead = (e: TimelineEntry): string =>
  `${e.step} (gen ${e.generation}): ${e.outcome} ${e.outcome === 'Succeeded' ? 'in' : 'after'} ${formatDuration(e.durationMs!)}`;

interface HandlerDefinition {
  name: string;
  description?: string;
}

describe('the Temporal Web UI shows a served model readably', { timeout: 120_000 }, () => {
  it('current details: phase, endpoint, and one spaced line per step with its outcome and duration', async () => {
    expect(served.phase).toBe('Ready');
    const page = await openTab('user-metadata');
    const frame = await currentDetails(page, 'Ready');
    const picture = await shot(page, 'current-details');
    const lines = await linesOf(frame);
    const seen = `\n${lines.join('\n')}\n(${picture})`;

    expect(lines[0], seen).toBe(`${kube.ns}/webui on ${cluster}: Ready`);
    expect(lines, seen).toContain(`endpoint: ${served.endpoint} (model webui)`);
    const steps = ['claim', 'storage', 'download', 'release', 'rollout', 'startup', 'baseline'];
    expect(served.timeline.map((e) => e.step)).toEqual(steps);
    for (const entry of served.timeline) {
      const head = entryHead(entry);
      expect(
        lines.find((l) => l === head || l.startsWith(`${head} — `)),
        `a line "${head}":${seen}`,
      ).toBeDefined();
    }
    // On the screen too: each step's name stands apart from what follows it (a table's cells have no padding there).
    for (const step of steps) expect(await gapAfter(frame, step), `after "${step}":${seen}`).toBeGreaterThan(2);
    await page.close();
  });

  it('current details: the load baseline in words, as `ferry status` says it', async () => {
    expect(served.baseline, 'the model was measured').toMatchObject({ maxConcurrency: 2, capped: false });
    const page = await openTab('user-metadata');
    const frame = await currentDetails(page, 'load baseline');
    const picture = await shot(page, 'current-details-baseline');
    const lines = await linesOf(frame);
    const line = `load baseline: ${describeBaseline(served.baseline!)}`;
    expect(lines, `\n${lines.join('\n')}\n(${picture})`).toContain(line);
    expect(line).toMatch(/^load baseline: 2 requests at once per replica meet ttft ≤ 300ms and itl ≤ 100ms for 95%/);
    // The details the model was started with say the goal it is measured against.
    const started = await page.waitForSelector('iframe#user-metadata-details');
    const startedFrame = await started!.contentFrame();
    await startedFrame.waitForFunction(() => document.querySelector('main')?.innerText.includes('latency goal'));
    expect(await linesOf(startedFrame)).toContain(
      'latency goal: ttft ≤ 300ms and itl ≤ 100ms for 95%, measured with 16-token prompts and 32-token answers; ' +
        'above it each replica answers 429',
    );
    await page.close();
  });

  it('the status and spec queries say what they answer, in the metadata and on the Queries tab', async () => {
    const handle = new Client({ connection: connection! }).workflow.getHandle(workflowId());
    const { definition } = await handle.query<{
      definition: Record<'queryDefinitions' | 'signalDefinitions', HandlerDefinition[]>;
    }>('__temporal_workflow_metadata');
    const described = Object.fromEntries(definition.queryDefinitions.map((q) => [q.name, q.description]));
    expect(described.status).toMatch(/^The full status: phase, conditions, endpoint/);
    expect(described.spec).toMatch(/^The spec the model is being brought to/);
    expect(definition.signalDefinitions.map((s) => `${s.name}: ${s.description}`)).toEqual(
      expect.arrayContaining([expect.stringMatching(/^progress: From the activities/)]),
    );

    // The Queries tab's Query Type menu shows each query's description under its name.
    const page = await openTab('query');
    const menu = await page.waitForSelector('button[aria-controls="query-select-select"]');
    await menu!.click();
    const shown = await page.waitForFunction(() => {
      const options = Array.from(document.querySelectorAll('#query-select-select li[role="option"]'), (li) =>
        li.innerText.split('\n').map((l: string) => l.trim()),
      );
      return options.some(([name, description]) => name === 'status' && description) && Object.fromEntries(options);
    });
    const picture = await shot(page, 'queries');
    expect(await shown.jsonValue(), picture).toMatchObject({ status: described.status, spec: described.spec });
    await page.close();
  });

  it('text from outside Ferry shows as written: no markdown or HTML is made of it', async () => {
    const page = await openTab('user-metadata');
    // The UI's own markdown frame, given the summary of this model with a hostile error message.
    const details = new URL((await currentDetails(page, 'Ready')).url());
    const message = 'exit 1: *boom* in `main_loop` <b>x</b><img src=x> [here](#top) ~~a~~ &amp; \\ # no heading';
    const lastError = { reason: 'EngineExited', message, at: served.updatedAt, step: 'startup' as const };
    details.searchParams.set('content', summarizeStatus({ ...served, phase: 'Failed', lastError }));
    await page.goto(details.href);
    await page.waitForFunction(() => document.querySelector('main')?.innerText.includes('EngineExited'));
    expect(await linesOf(page.mainFrame())).toContain(`last error at startup: EngineExited: ${message}`);
    expect(await page.evaluate(() => document.querySelectorAll('main img, main b, main em, main del').length)).toBe(0);
    await page.close();
  });

  it('a person deletes a model from its page: More Actions, Send a Signal, `delete`', async () => {
    const name = 'webui-delete';
    await serve(name);
    const id = workflowIdFor({ cluster, namespace: kube.ns, name });
    const page = await browser!.newPage();
    await page.setViewport({ width: 1400, height: 1000 });
    await page.goto(`${ui}/namespaces/default/workflows/${encodeURIComponent(id)}`, { waitUntil: 'domcontentloaded' });
    await clickText(page, 'More Actions');
    await clickText(page, 'Send a Signal');
    // The Signal name menu lists the workflow's signals with their descriptions (from its metadata query).
    const menu = await page.waitForSelector('dialog[open] input#signal-select', { visible: true });
    await menu!.click();
    const options = await page.waitForFunction(() => {
      const items = Array.from(document.querySelectorAll('#signal-select-select li[role="option"]'), (li) =>
        li.innerText.split('\n').map((l: string) => l.trim()),
      );
      return items.some(([n]) => n === 'delete') && Object.fromEntries(items);
    });
    expect(await options.jsonValue()).toMatchObject({
      delete: expect.stringMatching(/^Tear the model down, like the delete Update/) as string,
      update: expect.stringMatching(/^Change the spec, for clients that can only signal/) as string,
    });
    // Chosen as a person does, with the mouse, once the menu has stopped moving (the page holds a second, hidden copy
    // of the list: the visible one is the last).
    await new Promise((r) => setTimeout(r, 500));
    const choices = await page.$$('#signal-select-select li[role="option"]');
    const labels = await Promise.all(
      choices.map((li) => li.evaluate((e) => (e as unknown as { innerText: string }).innerText.split('\n')[0]!.trim())),
    );
    await choices[labels.lastIndexOf('delete')]!.click();
    await page.waitForFunction(
      () =>
        (document.querySelector('dialog[open] input#signal-select') as unknown as { value?: string })?.value ===
        'delete',
    );
    // The input's editor (CodeMirror) closes brackets and quotes as they are typed, and steps over them after. It is
    // drawn again once a signal is chosen: typed into when it has the focus.
    await page.waitForFunction(() => {
      const content = document.querySelector('dialog[open] .cm-content') as unknown as { focus(): void } | null;
      content?.focus();
      return document.querySelector('dialog[open] .cm-editor.cm-focused') !== null;
    });
    await page.keyboard.type('{"reason": "from the Web UI"}');
    const editor = await page.waitForSelector('dialog[open] .cm-content');
    const picture = await shot(page, 'send-delete-signal');
    const typed = await editor!.evaluate((e) => (e as unknown as { innerText: string }).innerText);
    expect(typed, picture).toBe('{"reason": "from the Web UI"}');
    await clickText(page, 'Submit');

    const handle = new Client({ connection: connection! }).workflow.getHandle(id);
    const final = (await handle.result()) as { reason?: string; status: ModelStatus };
    expect(final.reason, picture).toBe('from the Web UI');
    expect(final.status.phase).toBe('Deleted');
    expect(final.status.timeline.at(-1)).toMatchObject({ step: 'teardown', outcome: 'Succeeded' });
    const described = await handle.describe();
    expect(described.searchAttributes.FerryPhase).toEqual(['Deleted']);
    // The page shows the run ended, as a person sees it once it refreshes.
    await page.reload({ waitUntil: 'domcontentloaded' });
    await page.waitForFunction(() => document.querySelector('main')?.innerText.includes('COMPLETED'));
    await page.close();
  });
});

/** Clicks the visible button, menu item or link whose text is `text`, once there is one. */
async function clickText(page: Page, text: string): Promise<void> {
  const visible = `Array.from(document.querySelectorAll('button, [role=menuitem], li, a')).find((e) => e.innerText?.trim() === ${JSON.stringify(text)} && e.offsetParent)`;
  await page.waitForFunction(visible);
  await page.evaluate(`${visible}.click()`);
}

/** The dev server's Web UI; a stack running Temporal's server on PostgreSQL has none, and these tests say so. */
function webUi(): string {
  const url = readLocalEnv().TEMPORAL_UI_URL;
  if (!url)
    throw new Error(
      'the local stack runs no Temporal Web UI (`--temporal postgres`): `npm run local:up -- --temporal dev`',
    );
  return url.replace(/\/+$/, '');
}
