// The load probe against an in-process SSE server whose timing and failures each test controls, and once against
// the vLLM stand-in. Timings are asserted with wide margins: the unit tests run on small, busy machines.
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { probe, type LatencyGoal, type ProbeTarget, type Workload } from '../../activities/baseline/index.js';
import { MAX_EVENT_BYTES, SseDecoder } from '../../activities/baseline/sse.js';
import { createEngineSim } from '../../deploy/engine-sim/server.js';

const SECRET = 'sk-probe-secret-0123456789';
const LOOSE: LatencyGoal = { ttftMs: 10_000, itlMs: 10_000, attainment: 1 };
const SMALL: Workload = { promptTokens: 12, outputTokens: 3 };
// Multi-byte characters, so a read cut inside one shows whether the text is decoded across reads.
const TOKEN_TEXTS = ['héllo', ' wörld', ' →', ' 🙂'];

interface ServerPlan {
  /** Delay before the first token, by the request's arrival index (0 first). */
  firstTokenDelayMs: (arrival: number) => number;
  tokenDelayMs: number;
  /** Anything but 200 answers with a vLLM-style error body that echoes the authorization header. */
  status: number;
  /** split: every event written in 5-byte pieces; coalesced: the whole stream in one write. */
  chunking: 'normal' | 'split' | 'coalesced';
  /** Destroys the connection right after the first token. */
  reset: boolean;
  omitDone: boolean;
  /** completion_tokens the usage chunk reports, when it differs from the tokens streamed. */
  reportedTokens: number | undefined;
  /** Refuses the request inside the stream, as vLLM 0.32 does a streamed one: 200, an error chunk, [DONE]. */
  streamError: boolean;
  /** The texts of the tokens, in turn. */
  texts: string[];
}

interface Seen {
  urls: string[];
  bodies: any[];
  headers: IncomingHttpHeaders[];
  started: number;
  inFlight: number;
  maxInFlight: number;
  /** Requests whose connection closed before the server finished answering. */
  closedEarly: number;
}

const servers: Server[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function startServer(overrides: Partial<ServerPlan> = {}) {
  const plan: ServerPlan = {
    firstTokenDelayMs: () => 0,
    tokenDelayMs: 0,
    status: 200,
    chunking: 'normal',
    reset: false,
    omitDone: false,
    reportedTokens: undefined,
    streamError: false,
    texts: TOKEN_TEXTS,
    ...overrides,
  };
  const seen: Seen = { urls: [], bodies: [], headers: [], started: 0, inFlight: 0, maxInFlight: 0, closedEarly: 0 };
  const server = createServer((req, res) => {
    const arrival = seen.started;
    seen.started += 1;
    seen.inFlight += 1;
    seen.maxInFlight = Math.max(seen.maxInFlight, seen.inFlight);
    // A client that went away cuts the server's waits short, as vLLM aborts such a request.
    const gone = new AbortController();
    let counted = false;
    const settle = () => {
      if (counted) return;
      counted = true;
      seen.inFlight -= 1;
      if (!res.writableFinished) seen.closedEarly += 1;
      gone.abort();
    };
    res.on('finish', settle);
    res.on('close', settle);
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (piece: string) => (raw += piece));
    req.on('end', () => {
      const body = JSON.parse(raw);
      seen.urls.push(req.url ?? '');
      seen.bodies.push(body);
      seen.headers.push(req.headers);
      answer(plan, arrival, body, res, gone.signal).catch(() => res.destroy());
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const target: ProbeTarget = {
    url: `http://127.0.0.1:${port}`,
    model: 'm',
    headers: { authorization: `Bearer ${SECRET}` },
  };
  return { plan, seen, target };
}

async function answer(plan: ServerPlan, arrival: number, body: any, res: ServerResponse, gone: AbortSignal) {
  if (plan.status !== 200) {
    res.writeHead(plan.status, { 'content-type': 'application/json' });
    const message = `Unauthorized: got ${body.model} with ${String(res.req.headers.authorization)} ${'x'.repeat(2000)}`;
    res.end(JSON.stringify({ error: { message, type: 'Unauthorized', param: null, code: plan.status } }));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
  const tokens: number = body.max_tokens;
  const event = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`;
  if (plan.streamError) {
    const error = { message: 'Token id 8232 is out of vocabulary', type: 'BadRequestError', param: null, code: 400 };
    res.end(`${event({ error })}data: [DONE]\n\n`);
    return;
  }
  const tokenEvent = (i: number) =>
    event({
      id: 'cmpl-test',
      object: 'text_completion',
      created: 0,
      model: body.model,
      choices: [
        {
          index: 0,
          text: plan.texts[i % plan.texts.length],
          logprobs: null,
          finish_reason: i === tokens - 1 ? 'length' : null,
        },
      ],
    });
  const tail =
    event({
      id: 'cmpl-test',
      choices: [],
      usage: { prompt_tokens: body.prompt.length, completion_tokens: plan.reportedTokens ?? tokens },
    }) + (plan.omitDone ? '' : 'data: [DONE]\n\n');

  await sleep(plan.firstTokenDelayMs(arrival), undefined, { signal: gone });
  if (plan.chunking === 'coalesced') {
    res.end(Array.from({ length: tokens }, (_, i) => tokenEvent(i)).join('') + tail);
    return;
  }
  for (let i = 0; i < tokens; i += 1) {
    if (i > 0) await sleep(plan.tokenDelayMs, undefined, { signal: gone });
    await write(res, tokenEvent(i), plan.chunking === 'split', gone);
    if (plan.reset) {
      // Past the headers and a token, so the stream (not the response) is what breaks.
      await sleep(20);
      res.socket?.destroy();
      return;
    }
  }
  await write(res, tail, plan.chunking === 'split', gone);
  res.end();
}

async function write(res: ServerResponse, text: string, split: boolean, gone: AbortSignal) {
  if (!split) {
    await new Promise((resolve) => res.write(text, resolve));
    return;
  }
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length; at += 5) {
    res.write(bytes.subarray(at, at + 5));
    // A pause between pieces makes each arrive as a read of its own.
    await sleep(1, undefined, { signal: gone });
  }
}

async function waitUntil(condition: () => boolean, timeoutMs = 3_000) {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await sleep(10);
  }
}

describe('probe', () => {
  it('measures time to first token and inter-token latency', async () => {
    const { target } = await startServer({ firstTokenDelayMs: () => 300, tokenDelayMs: 50 });
    const result = await probe(target, 1, { promptTokens: 8, outputTokens: 5 }, LOOSE, { requestsPerClient: 2 });
    expect(result).toMatchObject({
      concurrency: 1,
      requests: 2,
      good: 2,
      errors: 0,
      attainment: 1,
      meets: true,
      outputTokens: 10,
      stoppedEarly: false,
    });
    expect(result.firstError).toBeUndefined();
    expect(result.ttftP95Ms).toBeGreaterThanOrEqual(290);
    expect(result.ttftP95Ms).toBeLessThan(1000);
    expect(result.itlP95Ms).toBeGreaterThanOrEqual(40);
    expect(result.itlP95Ms).toBeLessThan(500);
  });

  it('judges every request against both latency bounds', async () => {
    // Every other request is slow to start: half the requests meet a 100 ms TTFT bound.
    const { target } = await startServer({ firstTokenDelayMs: (arrival) => (arrival % 2 === 1 ? 250 : 0) });
    const goal = { ttftMs: 100, itlMs: 10_000 };
    const half = await probe(target, 1, SMALL, { ...goal, attainment: 0.5 }, { requestsPerClient: 4 });
    expect(half).toMatchObject({ requests: 4, good: 2, errors: 0, attainment: 0.5, meets: true });
    const most = await probe(target, 1, SMALL, { ...goal, attainment: 0.75 }, { requestsPerClient: 4 });
    expect(most).toMatchObject({ requests: 4, good: 2, attainment: 0.5, meets: false, stoppedEarly: false });

    const { target: slowTokens } = await startServer({ tokenDelayMs: 30 });
    const itl = await probe(
      slowTokens,
      1,
      SMALL,
      { ttftMs: 10_000, itlMs: 5, attainment: 0.25 },
      { requestsPerClient: 4 },
    );
    expect(itl).toMatchObject({ requests: 4, good: 0, errors: 0, meets: false });
    expect(itl.itlP95Ms).toBeGreaterThan(5);
  });

  it("sends exactly the body vLLM's benchmark sends, with the caller's headers", async () => {
    const { seen, target } = await startServer();
    await probe({ ...target, url: `${target.url}/` }, 2, SMALL, LOOSE, { requestsPerClient: 2, seed: 7 });
    expect(seen.urls).toEqual(Array(4).fill('/v1/completions'));
    for (const [i, body] of seen.bodies.entries()) {
      expect(body).toEqual({
        model: 'm',
        prompt: expect.any(Array),
        max_tokens: 3,
        min_tokens: 3,
        ignore_eos: true,
        stream: true,
        stream_options: { include_usage: true },
        temperature: 0,
      });
      expect(Object.keys(body).sort()).toEqual(
        ['ignore_eos', 'max_tokens', 'min_tokens', 'model', 'prompt', 'stream', 'stream_options', 'temperature'].sort(),
      );
      expect(body.prompt).toHaveLength(12);
      for (const id of body.prompt) {
        expect(Number.isInteger(id) && id >= 1000 && id <= 9999).toBe(true);
      }
      expect(seen.headers[i]).toMatchObject({ authorization: `Bearer ${SECRET}`, 'content-type': 'application/json' });
    }
    // Distinct first ids, so the engine's prefix cache cannot serve one request's prefill from another's.
    const prompts = seen.bodies.map((body) => JSON.stringify(body.prompt));
    expect(new Set(seen.bodies.map((body) => body.prompt[0])).size).toBe(4);

    await probe(target, 2, SMALL, LOOSE, { requestsPerClient: 2, seed: 7 });
    const again = seen.bodies.slice(4).map((body) => JSON.stringify(body.prompt));
    expect(again.sort()).toEqual([...prompts].sort());
  });

  it('counts an error status as an error, keeping its message without header values', async () => {
    const { target } = await startServer({ status: 401 });
    const result = await probe(target, 1, SMALL, { ...LOOSE, attainment: 0.1 }, { requestsPerClient: 3 });
    expect(result).toMatchObject({ requests: 3, good: 0, errors: 3, attainment: 0, meets: false });
    expect(result.ttftP95Ms).toBeUndefined();
    expect(result.firstError).toMatch(/^HTTP 401: .*Unauthorized: got m with \[redacted\]/);
    expect(result.firstError).not.toContain(SECRET);
    expect(result.firstError?.length).toBeLessThanOrEqual(301);
  });

  it("reads a refusal inside the stream as the status it carries (vLLM's streamed 400)", async () => {
    const { target } = await startServer({ streamError: true });
    const result = await probe(target, 1, SMALL, { ...LOOSE, attainment: 0.1 }, { requestsPerClient: 2 });
    expect(result).toMatchObject({ requests: 2, good: 0, errors: 2 });
    expect(result.firstError).toBe('HTTP 400 in the stream: Token id 8232 is out of vocabulary');
  });

  it('counts a token whose text is empty (one that ends inside a character), as vLLM sends them', async () => {
    const { target } = await startServer({ texts: ['', 'é', ''], tokenDelayMs: 300 });
    const result = await probe(target, 1, SMALL, LOOSE, { requestsPerClient: 1 });
    expect(result).toMatchObject({ requests: 1, errors: 0, outputTokens: 3 });
    // The first token's chunk arrives at once, empty: the first token is not the first non-empty one, 300 ms later.
    expect(result.ttftP95Ms).toBeLessThan(250);
  });

  it("builds its prompts from the model's own token ids when it has them, still distinct", async () => {
    const { target, seen } = await startServer();
    const ids = Array.from({ length: 20 }, (_, i) => 100 + i);
    await probe(target, 3, SMALL, LOOSE, { requestsPerClient: 3, tokenIds: ids, seed: 5 });
    const prompts = seen.bodies.map((b) => b.prompt as number[]);
    expect(prompts).toHaveLength(9);
    for (const prompt of prompts) {
      expect(prompt).toHaveLength(SMALL.promptTokens);
      for (const id of prompt) expect(ids).toContain(id);
    }
    expect(new Set(prompts.map((p) => JSON.stringify(p))).size).toBe(9);
  });

  it('counts a reset connection and a stream without [DONE] as errors', async () => {
    const bad = { ...LOOSE, attainment: 0.1 };
    const { target } = await startServer({ reset: true, tokenDelayMs: 10 });
    const reset = await probe(target, 1, SMALL, bad, { requestsPerClient: 2 });
    expect(reset).toMatchObject({ requests: 2, good: 0, errors: 2, meets: false });
    expect(reset.firstError).toMatch(/^terminated: other side closed/);
    expect(reset.firstError).not.toContain(SECRET);

    const { target: cut } = await startServer({ omitDone: true });
    const unfinished = await probe(cut, 1, SMALL, bad, { requestsPerClient: 2 });
    expect(unfinished).toMatchObject({ requests: 2, errors: 2, firstError: 'stream ended before [DONE]' });
  });

  it('times out a request that takes too long', async () => {
    const { seen, target } = await startServer({ firstTokenDelayMs: () => 10_000 });
    const startedAt = Date.now();
    const result = await probe(
      target,
      1,
      SMALL,
      { ...LOOSE, attainment: 0.1 },
      {
        requestsPerClient: 2,
        requestTimeoutMs: 200,
      },
    );
    expect(Date.now() - startedAt).toBeLessThan(3_000);
    expect(result).toMatchObject({ requests: 2, errors: 2, firstError: 'timed out after 200 ms' });
    await waitUntil(() => seen.inFlight === 0);
    expect(seen.closedEarly).toBe(2);
  });

  it('reads events split across reads and several in one read', async () => {
    for (const chunking of ['split', 'coalesced'] as const) {
      const { target } = await startServer({ chunking });
      const result = await probe(target, 2, { promptTokens: 4, outputTokens: 6 }, LOOSE, { requestsPerClient: 2 });
      expect(result, chunking).toMatchObject({ requests: 4, good: 4, errors: 0, outputTokens: 24 });
    }
  });

  it('counts output tokens from the usage chunk when there is one', async () => {
    const { target } = await startServer({ tokenDelayMs: 20, reportedTokens: 9 });
    const result = await probe(target, 1, { promptTokens: 4, outputTokens: 3 }, LOOSE, { requestsPerClient: 1 });
    expect(result.outputTokens).toBe(9);
    // Two gaps of ~20 ms spread over the 8 gaps the usage count implies.
    expect(result.itlP95Ms).toBeLessThan(20);
  });

  it('stops early once the goal is out of reach, aborting the requests in flight', async () => {
    // 12 planned requests with 90% to be good: the second bad one decides. Requests after the first two never start.
    const delays = [100, 250];
    const { seen, target } = await startServer({ firstTokenDelayMs: (arrival) => delays[arrival] ?? 10_000 });
    const startedAt = Date.now();
    const result = await probe(target, 4, SMALL, { ttftMs: 50, itlMs: 10_000, attainment: 0.9 });
    expect(Date.now() - startedAt).toBeLessThan(3_000);
    expect(result).toMatchObject({ requests: 2, good: 0, errors: 0, meets: false, stoppedEarly: true });
    // The 4 first requests, plus the one the first client sent after its first answer.
    expect(seen.started).toBeLessThanOrEqual(5);
    await waitUntil(() => seen.inFlight === 0);
    expect(seen.closedEarly).toBe(seen.started - 2);
  });

  it('aborts everything when the signal fires, rejecting with its reason', async () => {
    const { seen, target } = await startServer({ firstTokenDelayMs: () => 10_000 });
    const controller = new AbortController();
    const reason = new Error('workflow cancelled');
    setTimeout(() => controller.abort(reason), 150);
    const startedAt = Date.now();
    await expect(probe(target, 3, SMALL, LOOSE, { signal: controller.signal })).rejects.toBe(reason);
    expect(Date.now() - startedAt).toBeLessThan(3_000);
    await waitUntil(() => seen.inFlight === 0);
    expect(seen).toMatchObject({ started: 3, closedEarly: 3 });

    await expect(probe(target, 3, SMALL, LOOSE, { signal: controller.signal })).rejects.toBe(reason);
    expect(seen.started).toBe(3);
  });

  it('never has more requests in flight than its concurrency', async () => {
    for (const concurrency of [1, 3]) {
      const { seen, target } = await startServer({ firstTokenDelayMs: () => 20, tokenDelayMs: 10 });
      const result = await probe(target, concurrency, SMALL, LOOSE, { requestsPerClient: 4 });
      expect(result.requests).toBe(4 * concurrency);
      expect(seen.started).toBe(4 * concurrency);
      expect(seen.maxInFlight).toBe(concurrency);
    }
  });

  it('refuses inputs that cannot describe a load', async () => {
    const { seen, target } = await startServer();
    await expect(probe(target, 0, SMALL, LOOSE)).rejects.toThrow(RangeError);
    await expect(probe(target, 1.5, SMALL, LOOSE)).rejects.toThrow(RangeError);
    await expect(probe(target, 1, { promptTokens: 0, outputTokens: 1 }, LOOSE)).rejects.toThrow(RangeError);
    await expect(probe(target, 1, SMALL, { ...LOOSE, attainment: 1.5 })).rejects.toThrow(RangeError);
    await expect(probe(target, 1, SMALL, LOOSE, { requestsPerClient: 0 })).rejects.toThrow(RangeError);
    expect(seen.started).toBe(0);
  });

  it('gets good answers from the vLLM stand-in', async () => {
    const sim = createEngineSim({ servedModelNames: ['m'], port: 0, loadDelaySeconds: 0, tokenDelayMs: 5 });
    const { port } = await sim.start();
    try {
      const result = await probe(
        { url: `http://127.0.0.1:${port}`, model: 'm' },
        2,
        { promptTokens: 16, outputTokens: 4 },
        LOOSE,
      );
      expect(result).toMatchObject({ concurrency: 2, requests: 6, good: 6, errors: 0, meets: true });
      expect(result.outputTokens).toBeGreaterThan(0);
    } finally {
      await sim.stop();
    }
  });
});

describe('SseDecoder', () => {
  const stream =
    'data: a\n\ndata: b\r\n\r\n: keep-alive\n\nevent: x\ndata:{}\n\ndata: one\ndata: two\n\ndata: [DONE]\n\n';
  const expected = ['a', 'b', '{}', 'one\ntwo', '[DONE]'];

  it('yields the same payloads however the text is cut', () => {
    for (const size of [1, 2, 3, 7, stream.length]) {
      const decoder = new SseDecoder();
      const payloads: string[] = [];
      for (let at = 0; at < stream.length; at += size) payloads.push(...decoder.push(stream.slice(at, at + size))!);
      expect(payloads, `pieces of ${size}`).toEqual(expected);
    }
  });

  it('holds an event back until its blank line arrives', () => {
    const decoder = new SseDecoder();
    expect(decoder.push('data: {"a":1}\n')).toEqual([]);
    expect(decoder.push('\n')).toEqual(['{"a":1}']);
  });

  it('gives up on an event that grows past MAX_EVENT_BYTES, whether in one line or many; comments do not add up', () => {
    const kib = 'x'.repeat(1024);
    const endless = new SseDecoder();
    let last: string[] | undefined = [];
    for (let i = 0; i <= 1024 && last; i++) last = endless.push(i === 0 ? `data: ${kib}` : kib);
    expect(last).toBeUndefined();
    const lines = new SseDecoder();
    last = [];
    for (let i = 0; i <= 1024 && last; i++) last = lines.push(`data: ${kib}\n`);
    expect(last).toBeUndefined();
    const comments = new SseDecoder();
    for (let i = 0; i < 2048; i++) expect(comments.push(`: ${kib}\n`)).toEqual([]);
    expect(comments.push('data: ok\n\n')).toEqual(['ok']);
    expect(MAX_EVENT_BYTES).toBe(1024 * 1024);
  });
});
