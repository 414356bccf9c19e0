// The measurement's prompts use the model's own token ids, from vLLM's /tokenize; an engine without the route (or
// with a broken answer) leaves the prober to its usual ids.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { vocabularyIds } from '../../activities/baseline/index.js';

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

async function engine(answer: (body: any) => { status: number; body: string }) {
  const seen: any[] = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', () => {
      const body = JSON.parse(raw);
      seen.push({ url: req.url, body, auth: req.headers.authorization });
      const a = answer(body);
      res.writeHead(a.status, { 'content-type': 'application/json' }).end(a.body);
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

describe("the model's token ids", () => {
  it('are the distinct ids /tokenize gives for an ordinary text, asked with the model and the key', async () => {
    const tokens = Array.from({ length: 40 }, (_, i) => (i * 7) % 30);
    const e = await engine(() => ({ status: 200, body: JSON.stringify({ count: 40, tokens, max_model_len: 512 }) }));
    const ids = await vocabularyIds({ url: e.url, model: 'tiny', headers: { authorization: 'Bearer k' } });
    expect(ids).toEqual([...new Set(tokens)]);
    expect(e.seen[0]).toMatchObject({
      url: '/tokenize',
      body: { model: 'tiny', add_special_tokens: false },
      auth: 'Bearer k',
    });
  });

  it('are unknown without the route, with too few ids, or with an answer that is not one', async () => {
    const missing = await engine(() => ({ status: 404, body: '{"detail":"Not Found"}' }));
    expect(await vocabularyIds({ url: missing.url, model: 'm' })).toBeUndefined();
    const few = await engine(() => ({ status: 200, body: JSON.stringify({ tokens: [1, 2, 3] }) }));
    expect(await vocabularyIds({ url: few.url, model: 'm' })).toBeUndefined();
    const huge = await engine(() => ({ status: 200, body: JSON.stringify({ tokens: Array(50_000).fill(1) }) }));
    expect(await vocabularyIds({ url: huge.url, model: 'm' })).toBeUndefined();
    const odd = await engine(() => ({ status: 200, body: JSON.stringify({ tokens: 'no' }) }));
    expect(await vocabularyIds({ url: odd.url, model: 'm' })).toBeUndefined();
  });
});
