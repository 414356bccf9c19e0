// An engine's answers are read only up to a bound: one that answers /health without end leaves the worker's memory
// flat, the probe says why the engine is not ready, and the connection is let go.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AnswerTooLarge, answerForMessage, MAX_ANSWER_BYTES, readAnswer } from '../../activities/engine-answers.js';
import { probeEngine } from '../../activities/steps/health.js';
import { parseServedModel } from '../../workflows/contract/index.js';

const model = parseServedModel({
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: { name: 'qwen', namespace: 'models' },
  spec: { source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } } },
});

let server: Server | undefined;
afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

/** An engine whose every answer is endless; resolves its URL and when the worker hung up. */
async function endlessEngine(): Promise<{ url: string; bytesSent: () => number; hungUp: Promise<void> }> {
  let sent = 0;
  let hangUp: () => void = () => undefined;
  const hungUp = new Promise<void>((resolve) => (hangUp = resolve));
  const chunk = Buffer.alloc(64 * 1024, 'x');
  server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.on('close', hangUp);
    const write = () => {
      while (!res.destroyed && res.write(chunk)) sent += chunk.length;
      if (!res.destroyed) res.once('drain', write);
    };
    write();
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, bytesSent: () => sent, hungUp };
}

describe('reading an engine’s answers', () => {
  it('an endless /health: not ready, saying why, the connection let go, and the memory flat', async () => {
    const engine = await endlessEngine();
    global.gc?.();
    const before = process.memoryUsage().rss;
    const probe = await probeEngine({ endpoints: () => Promise.resolve(engine.url) }, model, { timeoutMs: 10_000 });
    expect(probe).toEqual({
      ready: false,
      endpoint: engine.url,
      state: 'Unhealthy',
      message: 'GET /health: the answer is larger than 1 MiB; it was cut off there',
    });
    await engine.hungUp;
    // What the engine managed to send before the worker hung up: about the bound, plus what the sockets buffer.
    expect(engine.bytesSent()).toBeLessThan(16 * MAX_ANSWER_BYTES);
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * 1024 * 1024);
  });

  it('refuses a declared length past the bound without reading, and reads an answer within it whole', async () => {
    const large = new Response('x', { headers: { 'content-length': String(MAX_ANSWER_BYTES + 1) } });
    await expect(readAnswer(large)).rejects.toBeInstanceOf(AnswerTooLarge);
    const utf8 = 'é'.repeat(1000);
    expect(await readAnswer(new Response(utf8))).toBe(utf8);
    expect(await readAnswer(new Response(null))).toBe('');
  });

  it('puts at most a few KiB of an answer into an error message', async () => {
    expect(await answerForMessage(new Response('model not found'))).toBe('model not found');
    expect(await answerForMessage(new Response('x'.repeat(5000)))).toBe(
      '(the answer is larger than 4 KiB; it was cut off there)',
    );
  });
});
