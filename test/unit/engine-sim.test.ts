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
    expect(await (await fetch(`${base}/version`)).json()).toEqual({ version: '0.11.0-ferry-sim' });
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
        prompt_logprobs: null,
      },
    ]);
    expect(body.usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 6, total_tokens: 10 });
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

  it('rejects requests beyond the context window', async () => {
    const { base } = await startSim({ maxModelLen: 5 });
    const res = await postJson(`${base}/v1/completions`, { model: 'qwen', prompt: 'a b c', max_tokens: 3 });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { message: string; type: string } };
    expect(body.error.type).toBe('BadRequestError');
    expect(body.error.message).toContain('maximum context length is 5 tokens');
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
        error: { message: 'The model `x` does not exist.', type: 'NotFoundError', param: null, code: 404 },
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
      "The lora adapter 'sql' has already been loaded.",
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

  it('refuses runtime loading without --enable-lora', async () => {
    const { base } = await startSim({ allowRuntimeLoraUpdating: true });
    const res = await postJson(`${base}/v1/load_lora_adapter`, { lora_name: 'sql', lora_path: '/adapters/sql' });
    expect(res.status).toBe(400);
    await res.arrayBuffer();
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
