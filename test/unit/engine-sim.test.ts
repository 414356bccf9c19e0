// The vLLM stand-in is exercised over real HTTP (fetch against a port-0 server), because its whole point is to
// look like vLLM on the wire to Ferry's probes, clients and scrapers.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
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
  const sim = createEngineSim({
    model: '/models/qwen2.5-0.5b',
    servedModelNames: ['qwen'],
    port: 0,
    loadDelaySeconds: 0,
    ...options,
  });
  running.push(sim);
  const { port } = await sim.start();
  return { sim, base: `http://127.0.0.1:${port}` };
}

function postJson(url: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

async function waitForStatus(url: string, status: number, timeoutMs = 5_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await fetch(url);
    await res.arrayBuffer();
    if (res.status === status) return res;
    if (Date.now() > deadline) throw new Error(`${url} still ${res.status}, wanted ${status}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Splits an SSE body into its `data:` payloads, checking the framing vLLM uses. */
function sseData(text: string): string[] {
  expect(text.endsWith('\n\n')).toBe(true);
  return text
    .split('\n\n')
    .filter((event) => event !== '')
    .map((event) => {
      expect(event.startsWith('data: ')).toBe(true);
      return event.slice('data: '.length);
    });
}

function metricValue(text: string, series: string, labelFragment = ''): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series}{`) && l.includes(labelFragment));
  if (!line) throw new Error(`no ${series} in metrics`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('engine-sim lifecycle', () => {
  it('answers /health 503 while loading, then 200 with an empty body', async () => {
    // Long enough that the two requests below land inside it on a loaded CI machine too.
    const { base } = await startSim({ loadDelaySeconds: 2 });
    const loading = await fetch(`${base}/health`);
    expect(loading.status).toBe(503);
    await loading.arrayBuffer();

    // Everything but /health refuses while loading, with an OpenAI-style body.
    const models = await fetch(`${base}/v1/models`);
    expect(models.status).toBe(503);
    expect(models.headers.get('retry-after')).toMatch(/^\d+$/);
    const body = (await models.json()) as { error: { type: string; code: number } };
    expect(body.error).toMatchObject({ type: 'ServiceUnavailableError', code: 503, param: null });

    const ready = await waitForStatus(`${base}/health`, 200);
    expect(ready.headers.get('content-length')).toBe('0');
    expect((await fetch(`${base}/v1/models`)).status).toBe(200);
  });

  it('turns /health to 503 (as vLLM does once its engine died) and refuses generation once fail-after elapses', async () => {
    const { sim, base } = await startSim({ failAfterSeconds: 0.2 });
    expect((await fetch(`${base}/health`)).status).toBe(200);
    await waitForStatus(`${base}/health`, 503);
    expect(sim.state.phase).toBe('failed');
    const res = await postJson(`${base}/v1/completions`, { model: 'qwen', prompt: 'hi' });
    expect(res.status).toBe(500);
    expect(((await res.json()) as { error: { code: number } }).error.code).toBe(500);
  });

  it('reports its phase and stops cleanly', async () => {
    const { sim, base } = await startSim();
    expect(sim.state.phase).toBe('ready');
    expect((await fetch(`${base}/version`)).status).toBe(200);
    await sim.stop();
    expect(sim.state.phase).toBe('stopped');
    await expect(fetch(`${base}/health`)).rejects.toThrow();
  });

  it('serves /version', async () => {
    const { base } = await startSim();
    expect(await (await fetch(`${base}/version`)).json()).toEqual({ version: '0.32.0+ferry-sim' });
  });
});

describe('engine-sim OpenAI API', () => {
  it('lists the served model in /v1/models like vLLM', async () => {
    const { base } = await startSim({ maxModelLen: 8192 });
    const res = await fetch(`${base}/v1/models`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { object: string; data: Record<string, unknown>[] };
    expect(body.object).toBe('list');
    expect(body.data).toHaveLength(1);
    expect(body.data[0]).toMatchObject({
      id: 'qwen',
      object: 'model',
      owned_by: 'vllm',
      root: '/models/qwen2.5-0.5b',
      parent: null,
      max_model_len: 8192,
    });
    expect(body.data[0]?.created).toEqual(expect.any(Number));
    expect(body.data[0]?.permission).toEqual([expect.objectContaining({ object: 'model_permission' })]);
  });

  it('answers a completion with vLLM shape and whitespace-token usage', async () => {
    const { base } = await startSim();
    const res = await postJson(`${base}/v1/completions`, { model: 'qwen', prompt: 'the quick brown fox' });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, any>;
    expect(body.id).toMatch(/^cmpl-/);
    expect(body).toMatchObject({ object: 'text_completion', model: 'qwen' });
    expect(body.created).toEqual(expect.any(Number));
    expect(body.choices).toEqual([
      {
        index: 0,
        text: '[ferry engine-sim] the quick brown fox',
        logprobs: null,
        finish_reason: 'stop',
        stop_reason: null,
        token_ids: null,
        prompt_logprobs: null,
        prompt_token_ids: null,
        routed_experts: null,
      },
    ]);
    expect(body.usage).toEqual({
      prompt_tokens: 4,
      completion_tokens: 6,
      total_tokens: 10,
      prompt_tokens_details: null,
      completion_tokens_details: null,
    });
    expect(body.system_fingerprint).toMatch(/^vllm-0\.32\.0\+ferry-sim-[0-9a-f]{8}$/);
  });

  it('answers a chat completion with an assistant message', async () => {
    const { base } = await startSim();
    const res = await postJson(`${base}/v1/chat/completions`, {
      model: 'qwen',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: [{ type: 'text', text: 'hello engine' }] },
      ],
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, any>;
    expect(body.id).toMatch(/^chatcmpl-/);
    expect(body).toMatchObject({ object: 'chat.completion', model: 'qwen' });
    expect(body.choices).toHaveLength(1);
    expect(body.choices[0]).toMatchObject({
      index: 0,
      message: { role: 'assistant', content: '[ferry engine-sim] hello engine' },
      finish_reason: 'stop',
    });
    expect(body.usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 4, total_tokens: 8 });
  });

  it('honours max_tokens and max_completion_tokens with finish_reason length', async () => {
    const { base } = await startSim();
    const completion = (await (
      await postJson(`${base}/v1/completions`, { prompt: 'one two three four five', max_tokens: 3 })
    ).json()) as Record<string, any>;
    expect(completion.choices[0].text).toBe('[ferry engine-sim] one');
    expect(completion.choices[0].finish_reason).toBe('length');
    expect(completion.usage.completion_tokens).toBe(3);
    // No model given: vLLM answers with the first served name.
    expect(completion.model).toBe('qwen');

    const chat = (await (
      await postJson(`${base}/v1/chat/completions`, {
        model: 'qwen',
        messages: [{ role: 'user', content: 'one two three' }],
        max_tokens: 50,
        max_completion_tokens: 1,
      })
    ).json()) as Record<string, any>;
    expect(chat.choices[0].message.content).toBe('[ferry');
    expect(chat.usage.completion_tokens).toBe(1);
  });

  it('returns n choices per prompt', async () => {
    const { base } = await startSim();
    const body = (await (
      await postJson(`${base}/v1/completions`, { model: 'qwen', prompt: ['a b', 'c'], n: 2 })
    ).json()) as Record<string, any>;
    expect(body.choices.map((c: { index: number }) => c.index)).toEqual([0, 1, 2, 3]);
    expect(body.usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 4 + 4 + 3 + 3 });
  });

  it('cuts max_tokens to the room the prompt leaves, and refuses a prompt beyond the context window, as vLLM 0.32', async () => {
    const { base } = await startSim({ maxModelLen: 5 });
    const cut = await postJson(`${base}/v1/completions`, { model: 'qwen', prompt: 'a b c', max_tokens: 3 });
    expect(cut.status).toBe(200);
    const answer = (await cut.json()) as Record<string, any>;
    expect(answer.usage.completion_tokens).toBe(2);
    expect(answer.choices[0].finish_reason).toBe('length');

    const noRoom = await postJson(`${base}/v1/completions`, { prompt: 'a b c d e', max_tokens: 3 });
    expect(await noRoom.json()).toEqual({
      error: {
        message: 'max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)',
        type: 'BadRequestError',
        param: 'max_tokens',
        code: 400,
      },
    });

    const beyond = await postJson(`${base}/v1/completions`, { prompt: 'a b c d e f g' });
    expect(beyond.status).toBe(400);
    const body = (await beyond.json()) as { error: { message: string; type: string; param: string } };
    expect(body.error).toMatchObject({ type: 'BadRequestError', param: 'input_tokens' });
    expect(body.error.message).toBe(
      "This model's maximum context length is 5 tokens. However, your prompt contains at least 6 input tokens, " +
        'which exceeds this limit even without any output tokens. Please reduce the length of the input prompt. ' +
        '(parameter=input_tokens, value=6)',
    );
  });

  it('streams completion chunks then [DONE]', async () => {
    const { base } = await startSim();
    const res = await postJson(`${base}/v1/completions`, { model: 'qwen', prompt: 'stream me please', stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const data = sseData(await res.text());
    expect(data.at(-1)).toBe('[DONE]');
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as Record<string, any>);
    expect(chunks).toHaveLength(5);
    for (const chunk of chunks) {
      expect(chunk.id).toMatch(/^cmpl-/);
      expect(chunk.object).toBe('text_completion');
      expect(chunk.model).toBe('qwen');
    }
    expect(chunks.map((c) => c.choices[0].text).join('')).toBe('[ferry engine-sim] stream me please');
    expect(chunks.slice(0, -1).every((c) => c.choices[0].finish_reason === null)).toBe(true);
    expect(chunks.at(-1)?.choices[0].finish_reason).toBe('stop');
  });

  it('streams chat deltas, a usage chunk when asked, then [DONE]', async () => {
    const { base } = await startSim();
    const res = await postJson(`${base}/v1/chat/completions`, {
      model: 'qwen',
      messages: [{ role: 'user', content: 'hi there' }],
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 3,
    });
    const data = sseData(await res.text());
    expect(data.at(-1)).toBe('[DONE]');
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as Record<string, any>);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id.startsWith('chatcmpl-'))).toBe(true);
    expect(chunks[0]?.choices[0].delta).toEqual({ role: 'assistant', content: '' });
    const usageChunk = chunks.at(-1);
    expect(usageChunk?.choices).toEqual([]);
    expect(usageChunk?.usage).toMatchObject({ prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 });
    const deltas = chunks.slice(1, -1);
    expect(deltas.map((c) => c.choices[0].delta.content).join('')).toBe('[ferry engine-sim] hi');
    expect(deltas.at(-1)?.choices[0].finish_reason).toBe('length');
  });

  it('answers an unknown model with 404 in vLLM error shape', async () => {
    const { base } = await startSim();
    for (const path of ['/v1/completions', '/v1/chat/completions']) {
      const res = await postJson(`${base}${path}`, {
        model: 'x',
        prompt: 'hi',
        messages: [{ role: 'user', content: 'hi' }],
      });
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({
        error: {
          message: 'The model `x` does not exist. Valid aliases: qwen.',
          type: 'NotFoundError',
          param: 'model',
          code: 404,
        },
      });
    }
  });

  it('rejects invalid JSON, a non-JSON content type and missing fields with 400', async () => {
    const { base } = await startSim();
    const invalid = await fetch(`${base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"model": "qwen", ',
    });
    expect(invalid.status).toBe(400);
    expect(((await invalid.json()) as { error: { code: number } }).error.code).toBe(400);

    const plain = await fetch(`${base}/v1/completions`, { method: 'POST', body: '{"prompt":"hi"}' });
    expect(plain.status).toBe(400);
    await plain.arrayBuffer();

    const noMessages = await postJson(`${base}/v1/chat/completions`, { model: 'qwen' });
    expect(noMessages.status).toBe(400);
    await noMessages.arrayBuffer();

    const zeroTokens = await postJson(`${base}/v1/completions`, { prompt: 'hi', max_tokens: 0 });
    expect(zeroTokens.status).toBe(400);
    await zeroTokens.arrayBuffer();
  });

  it('answers unknown paths and wrong methods like FastAPI', async () => {
    const { base } = await startSim();
    const missing = await fetch(`${base}/v1/nope`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ detail: 'Not Found' });
    const wrongMethod = await fetch(`${base}/v1/completions`);
    expect(wrongMethod.status).toBe(405);
    await wrongMethod.arrayBuffer();
  });
});

describe('engine-sim API key', () => {
  it('requires the bearer token on /v1/* only', async () => {
    const { base } = await startSim({ apiKey: 'sekret' });
    const bare = await fetch(`${base}/v1/models`);
    expect(bare.status).toBe(401);
    expect(await bare.json()).toEqual({ error: 'Unauthorized' });

    const wrong = await fetch(`${base}/v1/models`, { headers: { authorization: 'Bearer nope' } });
    expect(wrong.status).toBe(401);
    await wrong.arrayBuffer();

    const good = await fetch(`${base}/v1/models`, { headers: { authorization: 'Bearer sekret' } });
    expect(good.status).toBe(200);
    await good.arrayBuffer();

    const completion = await postJson(`${base}/v1/completions`, { prompt: 'hi' }, { authorization: 'Bearer sekret' });
    expect(completion.status).toBe(200);
    await completion.arrayBuffer();

    // As in vLLM, probes and scrapers need no key.
    for (const path of ['/health', '/metrics', '/version']) {
      const res = await fetch(`${base}${path}`);
      expect(res.status, path).toBe(200);
      await res.arrayBuffer();
    }
  });
});

describe('engine-sim LoRA', () => {
  it('loads an adapter, lists it, serves it as a model, and unloads it', async () => {
    const { sim, base } = await startSim({ enableLora: true, maxLoras: 2, allowRuntimeLoraUpdating: true });
    const load = await postJson(`${base}/v1/load_lora_adapter`, { lora_name: 'sql', lora_path: '/adapters/sql' });
    expect(load.status).toBe(200);
    expect(await load.text()).toBe("Success: LoRA adapter 'sql' added successfully.");
    expect(sim.state.loraAdapters.get('sql')).toBe('/adapters/sql');

    const duplicate = await postJson(`${base}/v1/load_lora_adapter`, { lora_name: 'sql', lora_path: '/adapters/sql' });
    expect(duplicate.status).toBe(400);
    expect(((await duplicate.json()) as { error: { message: string } }).error.message).toBe(
      "The lora adapter 'sql' has already been loaded. If you want to load the adapter in place, set 'load_inplace' " +
        'to True.',
    );

    const models = (await (await fetch(`${base}/v1/models`)).json()) as { data: Record<string, unknown>[] };
    expect(models.data.map((m) => m.id)).toEqual(['qwen', 'sql']);
    expect(models.data[1]).toMatchObject({ id: 'sql', root: '/adapters/sql', parent: 'qwen', object: 'model' });

    const completion = (await (
      await postJson(`${base}/v1/completions`, { model: 'sql', prompt: 'select' })
    ).json()) as Record<string, any>;
    expect(completion.model).toBe('sql');
    expect(completion.choices[0].text).toBe('[ferry engine-sim] select');

    const unload = await postJson(`${base}/v1/unload_lora_adapter`, { lora_name: 'sql' });
    expect(unload.status).toBe(200);
    expect(await unload.text()).toBe("Success: LoRA adapter 'sql' removed successfully.");

    const again = await postJson(`${base}/v1/unload_lora_adapter`, { lora_name: 'sql' });
    expect(again.status).toBe(404);
    expect(((await again.json()) as { error: { type: string } }).error.type).toBe('NotFoundError');

    const gone = await postJson(`${base}/v1/completions`, { model: 'sql', prompt: 'select' });
    expect(gone.status).toBe(404);
    await gone.arrayBuffer();
  });

  it('has no LoRA routes when runtime updating is disabled', async () => {
    const { base } = await startSim({ enableLora: true, allowRuntimeLoraUpdating: false });
    for (const path of ['/v1/load_lora_adapter', '/v1/unload_lora_adapter']) {
      const res = await postJson(`${base}${path}`, { lora_name: 'sql', lora_path: '/adapters/sql' });
      expect(res.status, path).toBe(404);
      expect(await res.json()).toEqual({ detail: 'Not Found' });
    }
  });

  it('refuses runtime loading without --enable-lora with the 500 vLLM 0.32 answers (its worker refuses it)', async () => {
    const { base } = await startSim({ allowRuntimeLoraUpdating: true });
    const res = await postJson(`${base}/v1/load_lora_adapter`, { lora_name: 'sql', lora_path: '/adapters/sql' });
    expect(res.status).toBe(500);
    expect(((await res.json()) as { error: { message: string; type: string } }).error).toMatchObject({
      type: 'InternalServerError',
      message:
        "Call to add_lora method failed: Worker failed with error 'LoRA is not enabled. Use --enable-lora to enable " +
        "LoRA.', please check the stack trace above for the root cause",
    });
  });

  it('given the volume (FERRY_SIM_MODELS_DIR), refuses a path without an adapter as vLLM does, and forgets on restart', async () => {
    const volume = mkdtempSync(join(tmpdir(), 'sim-volume-'));
    mkdirSync(join(volume, 'adapters', 'a1b2c3d4'), { recursive: true });
    writeFileSync(join(volume, 'adapters', 'a1b2c3d4', 'adapter_config.json'), '{"r": 8}');
    const { enableLora, allowRuntimeLoraUpdating, modelsDir } = parseEngineArgs(['--enable-lora'], {
      VLLM_ALLOW_RUNTIME_LORA_UPDATING: 'True',
      FERRY_SIM_MODELS_DIR: volume,
    }).options;
    expect(modelsDir).toBe(volume);
    const options = { enableLora, allowRuntimeLoraUpdating, modelsDir };
    const first = await startSim(options);
    const ok = await postJson(`${first.base}/v1/load_lora_adapter`, {
      lora_name: 'sql',
      lora_path: '/models/adapters/a1b2c3d4',
    });
    expect(ok.status).toBe(200);
    await ok.arrayBuffer();
    for (const path of ['/models/adapters/ffffffff', '/models/adapters/../../etc', '/adapters/a1b2c3d4']) {
      const missing = await postJson(`${first.base}/v1/load_lora_adapter`, { lora_name: 'chat', lora_path: path });
      expect(missing.status, path).toBe(404);
      expect(await missing.json(), path).toMatchObject({
        error: { type: 'NotFoundError', message: `Loading lora chat failed: No adapter found for ${path}` },
      });
    }
    await first.sim.stop();

    // A new process (the pod's container restarted) holds no adapter, as vLLM keeps them only in memory.
    const second = await startSim(options);
    const models = (await (await fetch(`${second.base}/v1/models`)).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toEqual(['qwen']);
  });

  it('lists static --lora-modules from the start', async () => {
    const { base } = await startSim({ enableLora: true, loraModules: [{ name: 'chat', path: '/adapters/chat' }] });
    const models = (await (await fetch(`${base}/v1/models`)).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toEqual(['qwen', 'chat']);
  });
});

describe('engine-sim: vLLM 0.32 details (test/real-engine/conformance.test.ts checks them against the real engine)', () => {
  it('tokenizes into ids of the model’s vocabulary, and refuses ids beyond it, in the stream too', async () => {
    const volume = mkdtempSync(join(tmpdir(), 'sim-volume-'));
    mkdirSync(join(volume, 'tiny'));
    writeFileSync(join(volume, 'tiny', 'config.json'), '{"vocab_size": 541}');
    const { base } = await startSim({ model: '/models/tiny', modelsDir: volume, maxModelLen: 512 });
    const tokenized = await postJson(`${base}/tokenize`, { prompt: 'hello world hello' });
    const body = (await tokenized.json()) as { count: number; tokens: number[]; max_model_len: number };
    expect(body).toMatchObject({ count: 3, max_model_len: 512, token_strs: null });
    expect(body.tokens[0]).toBe(body.tokens[2]);
    expect(body.tokens.every((id) => id >= 3 && id < 541)).toBe(true);

    const refused = await postJson(`${base}/v1/completions`, { prompt: [1, 2, 541], max_tokens: 1 });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toBe(
      'Token id 541 is out of vocabulary',
    );
    const streamed = await postJson(`${base}/v1/completions`, { prompt: [541], max_tokens: 1, stream: true });
    expect(streamed.status).toBe(200);
    expect(await streamed.text()).toBe(
      'data: {"error": {"message": "Token id 541 is out of vocabulary", "type": "BadRequestError", "param": null, ' +
        '"code": 400}}\n\ndata: [DONE]\n\n',
    );
  });

  it('reads the key as vLLM does: any case of bearer, on /v1, /v2, /inference and /cohere, never on OPTIONS', async () => {
    const { base } = await startSim({ apiKey: 'sekret' });
    expect((await fetch(`${base}/v1/models`, { headers: { authorization: 'bearer sekret' } })).status).toBe(200);
    expect((await fetch(`${base}/v1/models`, { headers: { authorization: 'Basic sekret' } })).status).toBe(401);
    expect((await fetch(`${base}/v2/models`)).status).toBe(401);
    expect((await fetch(`${base}/v1/models`, { method: 'OPTIONS' })).status).toBe(405);
    expect((await postJson(`${base}/tokenize`, { prompt: 'open' })).status).toBe(200);
  });

  it('reports pydantic’s validation errors and hides system paths in messages, as vLLM does', async () => {
    const { base } = await startSim({ enableLora: true, allowRuntimeLoraUpdating: true, modelsDir: tmpdir() });
    const typed = await postJson(`${base}/v1/completions`, { prompt: 'hi', max_tokens: 'x', n: 'y' });
    expect(((await typed.json()) as { error: unknown }).error).toEqual({
      message:
        "2 validation errors:\n  {'type': 'int_parsing', 'loc': 'body.max_tokens', 'msg': 'Input should be a valid " +
        "integer, unable to parse string as an integer', 'input': 'x'}\n  {'type': 'int_parsing', 'loc': 'body.n', " +
        "'msg': 'Input should be a valid integer, unable to parse string as an integer', 'input': 'y'}",
      type: 'Bad Request',
      param: 'body.max_tokens',
      code: 400,
    });
    const hidden = await postJson(`${base}/v1/load_lora_adapter`, { lora_name: 'a', lora_path: '/tmp/nowhere/a' });
    expect(((await hidden.json()) as { error: { message: string } }).error.message).toBe(
      'Loading lora a failed: No adapter found for <path>',
    );
  });

  it('exposes the KV cache’s use and, with LoRA, the adapters in flight (vllm:lora_requests_info)', async () => {
    const { base } = await startSim({
      enableLora: true,
      maxLoras: 2,
      loraModules: [{ name: 'sql', path: '/adapters/sql' }],
      maxNumSeqs: 2,
      maxModelLen: 100,
      tokenDelayMs: 100,
    });
    const idle = await (await fetch(`${base}/metrics`)).text();
    expect(idle).toContain('# TYPE vllm:lora_requests_info gauge');
    expect(idle).not.toMatch(/^vllm:lora_requests_info\{/m);
    expect(metricValue(idle, 'vllm:kv_cache_usage_perc')).toBe(0);

    const pending = postJson(`${base}/v1/completions`, { model: 'sql', prompt: 'a b c d e f g h i j', max_tokens: 3 });
    let during = '';
    for (let tries = 0; !during.includes('running_lora_adapters="sql"') && tries < 40; tries += 1) {
      during = await (await fetch(`${base}/metrics`)).text();
    }
    expect(during).toMatch(
      /^vllm:lora_requests_info\{max_lora="2",running_lora_adapters="sql",waiting_lora_adapters="sql"\} \d\.\d+e\+09$/m,
    );
    expect(metricValue(during, 'vllm:kv_cache_usage_perc')).toBeGreaterThan(0);
    await (await pending).json();
    const after = await (await fetch(`${base}/metrics`)).text();
    expect(metricValue(after, 'vllm:kv_cache_usage_perc')).toBe(0);
    expect(metricValue(after, 'vllm:lora_requests_info', 'running_lora_adapters=""')).toBeGreaterThanOrEqual(
      metricValue(after, 'vllm:lora_requests_info', 'running_lora_adapters="sql"'),
    );
  });
});

describe('engine-sim metrics', () => {
  it('counts prompt and generation tokens in vLLM series', async () => {
    const { base } = await startSim();
    const before = await (await fetch(`${base}/metrics`)).text();
    expect(metricValue(before, 'vllm:prompt_tokens_total', 'model_name="qwen"')).toBe(0);
    expect(metricValue(before, 'vllm:num_requests_running')).toBe(0);
    expect(metricValue(before, 'vllm:num_requests_waiting')).toBe(0);

    await (await postJson(`${base}/v1/completions`, { model: 'qwen', prompt: 'a b c', max_tokens: 4 })).json();
    const res = await fetch(`${base}/metrics`);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const after = await res.text();
    expect(after).toContain('# TYPE vllm:prompt_tokens_total counter');
    expect(metricValue(after, 'vllm:prompt_tokens_total')).toBe(3);
    expect(metricValue(after, 'vllm:generation_tokens_total')).toBe(4);
    expect(metricValue(after, 'vllm:request_success_total', 'finished_reason="length"')).toBe(1);
  });

  it('shows a request as running while it decodes', async () => {
    const { base } = await startSim({ tokenDelayMs: 100 });
    const pending = postJson(`${base}/v1/completions`, { model: 'qwen', prompt: 'slow request here' });
    let running = 0;
    for (let tries = 0; running === 0 && tries < 40; tries += 1) {
      running = metricValue(await (await fetch(`${base}/metrics`)).text(), 'vllm:num_requests_running');
    }
    expect(running).toBe(1);
    await (await pending).json();
    const after = await (await fetch(`${base}/metrics`)).text();
    expect(metricValue(after, 'vllm:num_requests_running')).toBe(0);
  });
});

describe('engine-sim args', () => {
  it('accepts both --flag value and --flag=value', () => {
    const spaced = parseEngineArgs([
      '--model',
      '/models/qwen',
      '--served-model-name',
      'qwen',
      'qwen-alias',
      '--port',
      '0',
      '--host',
      '0.0.0.0',
      '--enable-lora',
      '--max-loras',
      '4',
      '--max-model-len',
      '2048',
    ]);
    const joined = parseEngineArgs([
      '--model=/models/qwen',
      '--served-model-name=qwen',
      '--port=0',
      '--host=0.0.0.0',
      '--enable-lora',
      '--max-loras=4',
      '--max_model_len=2048',
    ]);
    const expected = {
      model: '/models/qwen',
      port: 0,
      host: '0.0.0.0',
      enableLora: true,
      maxLoras: 4,
      maxModelLen: 2048,
    };
    expect(spaced.options).toMatchObject({ ...expected, servedModelNames: ['qwen', 'qwen-alias'] });
    expect(joined.options).toMatchObject({ ...expected, servedModelNames: ['qwen'] });
    expect(spaced.warnings).toEqual([]);
  });

  it('ignores unknown vLLM flags with a warning, including their values', () => {
    const { options, warnings } = parseEngineArgs([
      '--tensor-parallel-size',
      '2',
      '--enforce-eager',
      '--gpu-memory-utilization=0.9',
      '--served-model-name',
      'qwen',
    ]);
    expect(options.servedModelNames).toEqual(['qwen']);
    expect(warnings).toHaveLength(3);
    expect(warnings[0]).toContain('--tensor-parallel-size');
  });

  it('reads the stand-in knobs and vLLM environment variables', () => {
    const fromEnv = parseEngineArgs([], {
      VLLM_API_KEY: 'k',
      VLLM_ALLOW_RUNTIME_LORA_UPDATING: 'True',
      FERRY_SIM_LOAD_DELAY: '0.5',
    });
    expect(fromEnv.options).toMatchObject({ apiKey: 'k', allowRuntimeLoraUpdating: true, loadDelaySeconds: 0.5 });

    const flagsWin = parseEngineArgs(['--load-delay', '3', '--fail-after=7', '--api-key', 'flag'], {
      VLLM_API_KEY: 'env',
      FERRY_SIM_LOAD_DELAY: '0.5',
      VLLM_ALLOW_RUNTIME_LORA_UPDATING: '0',
    });
    expect(flagsWin.options).toMatchObject({
      apiKey: 'flag',
      loadDelaySeconds: 3,
      failAfterSeconds: 7,
      allowRuntimeLoraUpdating: false,
    });
    expect(parseEngineArgs([], { VLLM_ALLOW_RUNTIME_LORA_UPDATING: '1' }).options.allowRuntimeLoraUpdating).toBe(true);
    expect(parseEngineArgs([], { VLLM_API_KEY: '' }).options.apiKey).toBeUndefined();
  });

  it('understands vllm serve <model>, --no-<flag>, human-readable lengths and --lora-modules', () => {
    const { options } = parseEngineArgs([
      'serve',
      'Qwen/Qwen2.5-0.5B',
      '--enable-lora',
      '--lora-modules',
      'sql=/adapters/sql',
      '{"name":"chat","path":"/adapters/chat"}',
      '--max-model-len',
      '32K',
    ]);
    expect(options).toMatchObject({
      model: 'Qwen/Qwen2.5-0.5B',
      maxModelLen: 32768,
      loraModules: [
        { name: 'sql', path: '/adapters/sql' },
        { name: 'chat', path: '/adapters/chat' },
      ],
    });
    expect(parseEngineArgs(['--max-model-len=32k']).options.maxModelLen).toBe(32000);
    expect(parseEngineArgs(['--enable-lora', '--no-enable-lora']).options.enableLora).toBe(false);
  });

  it('rejects malformed values', () => {
    expect(() => parseEngineArgs(['--port', 'eighty'])).toThrow(ArgsError);
    expect(() => parseEngineArgs(['--port'])).toThrow(ArgsError);
    expect(() => parseEngineArgs(['--load-delay', '-1'])).toThrow(ArgsError);
    expect(() => parseEngineArgs(['--lora-modules', 'sql=/a'])).toThrow(/--enable-lora/);
    expect(() => parseEngineArgs(['a', 'b'])).toThrow(/unrecognized/);
  });
});

describe('engine-sim CLI', () => {
  it('prints the listening line, serves, and exits 0 on SIGTERM', async () => {
    const env = { ...process.env };
    delete env.VLLM_API_KEY;
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'deploy/engine-sim/main.ts', '--served-model-name', 'qwen', '--port', '0', '--load-delay=0'],
      { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
    });
    try {
      const firstLine = await new Promise<string>((resolve, reject) => {
        const lines = createInterface({ input: child.stdout });
        lines.once('line', (line) => {
          lines.close();
          resolve(line);
        });
        child.once('exit', () => reject(new Error(`engine-sim exited before listening: ${stderr}`)));
      });
      const listening = JSON.parse(firstLine) as { event: string; port: number; host: string };
      expect(listening).toMatchObject({ event: 'listening', host: '127.0.0.1' });
      expect(listening.port).toBeGreaterThan(0);

      const base = `http://127.0.0.1:${listening.port}`;
      await waitForStatus(`${base}/health`, 200);
      const models = (await (await fetch(`${base}/v1/models`)).json()) as { data: { id: string }[] };
      expect(models.data[0]?.id).toBe('qwen');

      child.kill('SIGTERM');
      expect(await exited).toEqual({ code: 0, signal: null });
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }, 30_000);
});
