// The stand-in's capacity model (deploy/engine-sim/README.md, "Capacity model"), checked from a client's side: what a
// load test would see on the wire and in /metrics. Timings run on a noisy 2-core box, so every time bound is loose
// and the tests wait on conditions rather than sleeping.
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { ArgsError, parseEngineArgs } from '../../deploy/engine-sim/args.js';
import { createEngineSim, type EngineSim, type EngineSimOptions } from '../../deploy/engine-sim/server.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const running: EngineSim[] = [];

afterEach(async () => {
  await Promise.all(running.splice(0).map((sim) => sim.stop()));
});

async function startSim(options: EngineSimOptions = {}) {
  const sim = createEngineSim({ servedModelNames: ['qwen'], port: 0, loadDelaySeconds: 0, ...options });
  running.push(sim);
  const { port } = await sim.start();
  return `http://127.0.0.1:${port}`;
}

function postJson(url: string, body: unknown, signal?: AbortSignal) {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal,
  });
}

/** A prompt of `count` token ids, as a load tester sends it. */
function tokenIds(count: number): number[] {
  return Array.from({ length: count }, (_, i) => i + 1);
}

type Chunk = Record<string, any>;

interface Stream {
  /** When (performance.now()) each chunk carrying a token arrived, in order. */
  readonly tokenTimes: number[];
  /** Every chunk before `[DONE]`; rejects if the stream breaks off or is aborted. */
  readonly done: Promise<Chunk[]>;
}

/** Starts a streaming request and records when its tokens arrive, as a client measuring latency would. */
function startStream(url: string, body: Record<string, unknown>, signal?: AbortSignal): Stream {
  const tokenTimes: number[] = [];
  const done = postJson(url, { ...body, stream: true }, signal).then((res) => {
    expect(res.status).toBe(200);
    return readChunks(res, tokenTimes);
  });
  // An aborted stream's rejection is awaited (or not) by the test that aborted it.
  done.catch(() => undefined);
  return { tokenTimes, done };
}

async function readChunks(res: Response, tokenTimes: number[]): Promise<Chunk[]> {
  const decoder = new TextDecoder();
  const chunks: Chunk[] = [];
  let buffer = '';
  for await (const bytes of res.body as AsyncIterable<Uint8Array>) {
    const arrivedAt = performance.now();
    buffer += decoder.decode(bytes, { stream: true });
    for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
      const data = buffer.slice('data: '.length, end);
      buffer = buffer.slice(end + 2);
      if (data === '[DONE]') return chunks;
      const chunk = JSON.parse(data) as Chunk;
      if (tokenText(chunk)) tokenTimes.push(arrivedAt);
      chunks.push(chunk);
    }
  }
  throw new Error('the stream ended without [DONE]');
}

/** The token a chunk carries ('' for role and usage chunks), completion or chat alike. */
function tokenText(chunk: Chunk): string {
  const choice = chunk.choices?.[0];
  return choice?.text ?? choice?.delta?.content ?? '';
}

function tokenChunks(chunks: Chunk[]): Chunk[] {
  return chunks.filter((chunk) => tokenText(chunk) !== '');
}

async function gauges(base: string) {
  const text = await (await fetch(`${base}/metrics`)).text();
  // Summed over the series' label sets (request_success_total has one per finish reason).
  const value = (series: string) => {
    const lines = text.split('\n').filter((l) => l.startsWith(`${series}{`));
    if (lines.length === 0) throw new Error(`no ${series} in metrics`);
    return lines.reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
  };
  return {
    running: value('vllm:num_requests_running'),
    waiting: value('vllm:num_requests_waiting'),
    succeeded: value('vllm:request_success_total'),
  };
}

/** Polls /metrics until `wanted` holds, and returns the gauges that satisfied it. */
async function waitForGauges(base: string, wanted: (g: Awaited<ReturnType<typeof gauges>>) => boolean) {
  const deadline = performance.now() + 10_000;
  for (;;) {
    const current = await gauges(base);
    if (wanted(current)) return current;
    if (performance.now() > deadline) throw new Error(`metrics never matched: ${JSON.stringify(current)}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

async function until(condition: () => boolean) {
  const deadline = performance.now() + 10_000;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error('condition never held');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function meanGap(times: readonly number[]): number {
  return ((times.at(-1) ?? 0) - (times[0] ?? 0)) / (times.length - 1);
}

const longAnswer = (tokens: number) => ({ prompt: tokenIds(4), max_tokens: tokens, ignore_eos: true });

describe('engine-sim capacity: --max-num-seqs and the queue', () => {
  it('runs max-num-seqs requests at once, queues the rest in /metrics, and starts a queued one only when a slot frees', async () => {
    const base = await startSim({ maxNumSeqs: 2, tokenDelayMs: 30 });
    const streams = Array.from({ length: 4 }, () => startStream(`${base}/v1/completions`, longAnswer(20)));

    expect(await waitForGauges(base, (g) => g.waiting === 2)).toMatchObject({ running: 2, waiting: 2 });
    await Promise.all(streams.map((s) => s.done));

    // Which two were queued is up to the server; they are the two whose first token came last.
    const byFirstToken = [...streams].sort((a, b) => (a.tokenTimes[0] ?? 0) - (b.tokenTimes[0] ?? 0));
    const [first, second, third, fourth] = byFirstToken.map((s) => s.tokenTimes);
    const firstFinished = Math.min(first?.at(-1) ?? 0, second?.at(-1) ?? 0);
    // Only the order is asserted, not times from the start: on a loaded machine the clients themselves start late.
    for (const queued of [third, fourth]) expect(queued?.[0]).toBeGreaterThan(firstFinished);
    for (const running of [first, second]) expect(running?.[0]).toBeLessThan(firstFinished);
    expect(await gauges(base)).toMatchObject({ running: 0, waiting: 0, succeeded: 4 });
  });

  it('queues non-streaming requests the same way', async () => {
    const base = await startSim({ maxNumSeqs: 1, tokenDelayMs: 30 });
    const started = performance.now();
    const finishedAt = [0, 1].map(() =>
      postJson(`${base}/v1/completions`, longAnswer(10)).then(async (res) => {
        expect(((await res.json()) as Chunk).usage.completion_tokens).toBe(10);
        return performance.now() - started;
      }),
    );
    expect(await waitForGauges(base, (g) => g.waiting === 1)).toMatchObject({ running: 1, waiting: 1 });
    const [sooner, later] = (await Promise.all(finishedAt)).sort((a, b) => a - b);
    // Each takes 10 steps of 30 ms; the second cannot start before the first is done.
    expect(later).toBeGreaterThan(540);
    expect((later ?? 0) - (sooner ?? 0)).toBeGreaterThan(240);
  });

  it('drops a client that leaves the queue, so the requests behind it do not wait for it', async () => {
    const base = await startSim({ maxNumSeqs: 1, tokenDelayMs: 30 });
    const holder = startStream(`${base}/v1/completions`, longAnswer(15));
    await waitForGauges(base, (g) => g.running === 1);
    const leaving = new AbortController();
    const quitter = startStream(`${base}/v1/completions`, longAnswer(100), leaving.signal);
    await waitForGauges(base, (g) => g.waiting === 1);

    leaving.abort();
    await expect(quitter.done).rejects.toThrow();
    expect(await waitForGauges(base, (g) => g.waiting === 0)).toMatchObject({ running: 1 });

    const next = startStream(`${base}/v1/completions`, longAnswer(3));
    await Promise.all([holder.done, next.done]);
    // Had the quitter kept its place, `next` would have waited behind its 100 steps (3 s).
    expect((next.tokenTimes[0] ?? 0) - (holder.tokenTimes.at(-1) ?? 0)).toBeLessThan(1_000);
    expect(await gauges(base)).toMatchObject({ running: 0, waiting: 0, succeeded: 2 });
  });

  it('frees the slot of a running request whose client leaves', async () => {
    const base = await startSim({ maxNumSeqs: 1, tokenDelayMs: 30 });
    const leaving = new AbortController();
    const quitter = startStream(`${base}/v1/completions`, longAnswer(100), leaving.signal);
    await until(() => quitter.tokenTimes.length > 0);
    const next = startStream(`${base}/v1/completions`, longAnswer(3));
    await waitForGauges(base, (g) => g.waiting === 1);

    const abortedAt = performance.now();
    leaving.abort();
    await expect(quitter.done).rejects.toThrow();
    await next.done;
    // The quitter had about 3 s of decoding left; its slot went to `next` at once.
    expect((next.tokenTimes[0] ?? 0) - abortedAt).toBeLessThan(1_000);
    expect(await gauges(base)).toMatchObject({ running: 0, waiting: 0, succeeded: 1 });
  });

  it('counts one request as one sequence however many choices it has, streaming them side by side', async () => {
    const base = await startSim({ maxNumSeqs: 1 });
    const { done } = startStream(`${base}/v1/completions`, { prompt: 'a b', n: 2, max_tokens: 3 });
    const chunks = tokenChunks(await done);
    expect(chunks.map((chunk) => chunk.choices[0].index)).toEqual([0, 1, 0, 1, 0, 1]);
    for (const index of [0, 1]) {
      const own = chunks.filter((chunk) => chunk.choices[0].index === index);
      expect(own.map(tokenText).join('')).toBe('[ferry engine-sim] a');
      expect(own.at(-1)?.choices[0].finish_reason).toBe('length');
    }
  });
});

describe('engine-sim capacity: step and prefill time', () => {
  it('makes inter-token gaps grow with the number of requests running (--batch-step-ms)', async () => {
    const base = await startSim({ tokenDelayMs: 10, batchStepMs: 40 });
    const alone = startStream(`${base}/v1/completions`, longAnswer(12));
    await alone.done;

    const together = Array.from({ length: 3 }, () => startStream(`${base}/v1/completions`, longAnswer(12)));
    await Promise.all(together.map((s) => s.done));

    // step(1) = 10 ms; step(3) = 10 + 40 × 2 = 90 ms.
    const aloneGap = meanGap(alone.tokenTimes);
    // Steps are due at fixed times, so a late timer shortens the next gap: the mean holds even on a loaded machine.
    expect(aloneGap).toBeLessThan(50);
    for (const stream of together) {
      expect(meanGap(stream.tokenTimes)).toBeGreaterThan(70);
      expect(meanGap(stream.tokenTimes)).toBeGreaterThan(aloneGap + 40);
    }
  });

  it('delays the first token by prefill time per prompt token, counting token-id prompts as their length', async () => {
    const base = await startSim({ tokenDelayMs: 5, prefillMsPerToken: 3 });
    const started = performance.now();
    const stream = startStream(`${base}/v1/completions`, {
      prompt: tokenIds(100),
      max_tokens: 2,
      stream_options: { include_usage: true },
    });
    const chunks = await stream.done;
    // 100 tokens × 3 ms + one 5 ms step.
    expect((stream.tokenTimes[0] ?? 0) - started).toBeGreaterThan(280);
    expect(chunks.at(-1)?.usage).toMatchObject({ prompt_tokens: 100, completion_tokens: 2 });
  });
});

describe('engine-sim capacity: answer length', () => {
  it('makes an ignore_eos answer exactly max_tokens long, streamed and usage alike', async () => {
    const base = await startSim();
    const chunks = await startStream(`${base}/v1/completions`, {
      ...longAnswer(50),
      stream_options: { include_usage: true },
    }).done;
    const tokens = tokenChunks(chunks);
    expect(tokens).toHaveLength(50);
    expect(tokens.at(-1)?.choices[0].finish_reason).toBe('length');
    expect(tokens.map(tokenText).join('')).toMatch(/^\[ferry engine-sim\] synthetic filler/);
    expect(chunks.at(-1)?.usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 50, total_tokens: 54 });

    const chat = (await (
      await postJson(`${base}/v1/chat/completions`, {
        messages: [{ role: 'user', content: 'hello' }],
        max_tokens: 40,
        ignore_eos: true,
      })
    ).json()) as Chunk;
    expect(chat.choices[0].message.content.split(' ')).toHaveLength(40);
    expect(chat.choices[0].finish_reason).toBe('length');
    expect(chat.usage.completion_tokens).toBe(40);
  });

  it('pads an answer to min_tokens, and refuses min_tokens above max_tokens as vLLM does', async () => {
    const base = await startSim();
    const padded = (await (
      await postJson(`${base}/v1/completions`, { prompt: 'hi', min_tokens: 30, max_tokens: 100 })
    ).json()) as Chunk;
    expect(padded.choices[0].text.split(' ')).toHaveLength(30);
    expect(padded.choices[0].finish_reason).toBe('stop');
    expect(padded.usage.completion_tokens).toBe(30);

    // The benchmark shape: max_tokens = min_tokens, so the budget, not the answer, ends it.
    const exact = (await (
      await postJson(`${base}/v1/completions`, { prompt: 'hi', min_tokens: 8, max_tokens: 8 })
    ).json()) as Chunk;
    expect(exact.usage.completion_tokens).toBe(8);
    expect(exact.choices[0].finish_reason).toBe('length');

    const refused = await postJson(`${base}/v1/completions`, { prompt: 'hi', min_tokens: 9, max_tokens: 8 });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as Chunk).error.message).toBe(
      'min_tokens must be less than or equal to max_tokens=8, got 9.',
    );
    // pydantic's lax booleans, as vLLM reads them: 'yes' is true, 'maybe' is refused.
    const lax = await postJson(`${base}/v1/completions`, { prompt: 'hi', ignore_eos: 'yes', max_tokens: 5 });
    expect(((await lax.json()) as Chunk).usage.completion_tokens).toBe(5);
    const wrongType = await postJson(`${base}/v1/completions`, { prompt: 'hi', ignore_eos: 'maybe' });
    expect(wrongType.status).toBe(400);
    expect(((await wrongType.json()) as Chunk).error).toMatchObject({ type: 'Bad Request', param: 'body.ignore_eos' });
  });
});

describe('engine-sim capacity: args', () => {
  it('reads --max-num-seqs in both spellings and defaults to 256 as vLLM does', () => {
    expect(parseEngineArgs(['--max-num-seqs', '8']).options.maxNumSeqs).toBe(8);
    expect(parseEngineArgs(['--max_num_seqs=8']).options.maxNumSeqs).toBe(8);
    expect(parseEngineArgs([]).options.maxNumSeqs).toBeUndefined();
    expect(createEngineSim().state.maxNumSeqs).toBe(256);
  });

  it('reads --batch-step-ms and --prefill-ms-per-token, else their environment variables', () => {
    expect(parseEngineArgs(['--batch-step-ms', '4', '--prefill_ms_per_token=0.5']).options).toMatchObject({
      batchStepMs: 4,
      prefillMsPerToken: 0.5,
    });
    const env = { FERRY_SIM_BATCH_STEP_MS: '2.5', FERRY_SIM_PREFILL_MS_PER_TOKEN: '0.25' };
    expect(parseEngineArgs([], env).options).toMatchObject({ batchStepMs: 2.5, prefillMsPerToken: 0.25 });
    expect(parseEngineArgs(['--batch_step_ms=7'], env).options).toMatchObject({
      batchStepMs: 7,
      prefillMsPerToken: 0.25,
    });
  });

  it('rejects bad values', () => {
    for (const argv of [
      ['--max-num-seqs', '0'],
      ['--max-num-seqs', '1.5'],
      ['--max_num_seqs=many'],
      ['--max-num-seqs'],
      ['--batch-step-ms', '-1'],
      ['--prefill-ms-per-token', 'fast'],
    ]) {
      expect(() => parseEngineArgs(argv), argv.join(' ')).toThrow(ArgsError);
    }
    expect(() => parseEngineArgs([], { FERRY_SIM_BATCH_STEP_MS: '-2' })).toThrow(ArgsError);
    expect(() => parseEngineArgs([], { FERRY_SIM_PREFILL_MS_PER_TOKEN: 'x' })).toThrow(/prefill-ms-per-token/);
    expect(() => createEngineSim({ maxNumSeqs: 0 })).toThrow(/maxNumSeqs/);
  });

  it('exits 2 on a bad --max-num-seqs, as vLLM does on a usage error', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'deploy/engine-sim/main.ts', '--max-num-seqs', '0'], {
      cwd: repoRoot,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(2);
    expect(stderr).toContain('--max-num-seqs');
  }, 30_000);
});
