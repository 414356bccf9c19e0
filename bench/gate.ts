// The gate's cost (docs/design/network-policy.md): the same streamed completions sent straight to the engine and
// through the gate — Debian's nginx running the configuration Ferry writes for a model without admission when the
// worker has FERRY_NETWORK_POLICY=on — taking turns round by round, so both see the same machine. Prints, for each
// number of requests at once, time to first token and to the last one, direct and through the gate, and their ratio;
// and checks on the way that the gate refuses the admin routes and passes every completion whole.
//
//   npm run bench:gate -- [--rounds 30] [--concurrency 1,8] [--tokens 32] [--token-delay-ms 10]
//
// Needs nothing of the local stack, only /usr/sbin/nginx (`bash deploy/local/install.sh nginx`). Simulated: the engine
// (the stand-in, in this process). Real: nginx and every byte of HTTP, on 127.0.0.1 (no network between them: a
// cluster's pod network adds nothing here, since the gate talks to vLLM inside the pod).
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { admissionConfig } from '../activities/builders/index.js';
import { createEngineSim } from '../deploy/engine-sim/server.js';
import { machine, percentile, sleep, streamOnce, type Streamed } from './lib.js';

const NGINX = '/usr/sbin/nginx';
const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '30' },
    concurrency: { type: 'string', default: '1,8' },
    tokens: { type: 'string', default: '32' },
    'token-delay-ms': { type: 'string', default: '10' },
  },
});
const rounds = Number(values.rounds);
const levels = values.concurrency.split(',').map(Number);
const tokens = Number(values.tokens);
const tokenDelayMs = Number(values['token-delay-ms']);
const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);

if (!existsSync(NGINX)) {
  log(`${NGINX} is missing: bash deploy/local/install.sh nginx`);
  process.exit(2);
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no free port');
  return address.port;
}

const sim = createEngineSim({
  servedModelNames: ['qwen'],
  port: 0,
  loadDelaySeconds: 0,
  maxNumSeqs: 256,
  tokenDelayMs,
});
const { port: enginePort } = await sim.start();
const prefix = mkdtempSync(join(tmpdir(), 'ferry-gate-bench-'));
// nginx, started as root here, runs its worker as nobody, which must reach the directories it creates in the prefix.
chmodSync(prefix, 0o755);
const gatePort = await freePort();
const conf = join(prefix, 'nginx.conf');
writeFileSync(
  conf,
  admissionConfig({
    listenPort: gatePort,
    listenAddress: '127.0.0.1',
    enginePort,
    maxConcurrency: undefined,
    retryAfterSeconds: 1,
    clientRoutesOnly: true,
    gateOnly: true,
  }),
);
const nginx = spawn(NGINX, ['-p', `${prefix}/`, '-c', conf, '-e', 'stderr', '-g', 'daemon off;'], {
  stdio: ['ignore', 'ignore', 'inherit'],
});
const direct = `http://127.0.0.1:${enginePort}`;
const gate = `http://127.0.0.1:${gatePort}`;

interface Side {
  ttft: number[];
  total: number[];
  failed: number;
}
const sides = () => ({
  direct: { ttft: [], total: [], failed: 0 } as Side,
  gate: { ttft: [], total: [], failed: 0 } as Side,
});

function record(side: Side, outcomes: Streamed[]): void {
  for (const o of outcomes) {
    if (o.status !== 200 || !o.done || o.ttftMs === undefined) side.failed++;
    else {
      side.ttft.push(o.ttftMs);
      side.total.push(o.totalMs);
    }
  }
}

const summary = (values: number[]) => ({
  p50: Math.round(percentile(values, 50) * 10) / 10,
  p95: Math.round(percentile(values, 95) * 10) / 10,
});
const ratio = (gated: number[], straight: number[], p: number) =>
  Math.round((percentile(gated, p) / percentile(straight, p)) * 100) / 100;

try {
  for (let i = 0; ; i++) {
    const res = await fetch(`${gate}/health`).catch(() => undefined);
    if (res?.status === 200) break;
    if (i > 200 || nginx.exitCode !== null) throw new Error('nginx did not start serving');
    await sleep(50);
  }
  const refused: Record<string, number> = {};
  for (const path of ['/v1/load_lora_adapter', '/scale_elastic_ep', '/collective_rpc']) {
    refused[path] = (await fetch(`${gate}${path}`, { method: 'POST', body: '{}' })).status;
  }
  const results = [];
  for (const concurrency of levels) {
    const seen = sides();
    for (let round = 0; round < rounds; round++) {
      // Turns: which side goes first alternates, so neither always meets a warmer machine.
      const order = round % 2 === 0 ? (['direct', 'gate'] as const) : (['gate', 'direct'] as const);
      for (const side of order) {
        const url = side === 'direct' ? direct : gate;
        record(seen[side], await Promise.all(Array.from({ length: concurrency }, () => streamOnce(url, tokens))));
      }
    }
    const row = {
      concurrency,
      requestsEach: rounds * concurrency,
      directMs: { ttft: summary(seen.direct.ttft), total: summary(seen.direct.total) },
      gateMs: { ttft: summary(seen.gate.ttft), total: summary(seen.gate.total) },
      gateOverDirect: {
        ttftP50: ratio(seen.gate.ttft, seen.direct.ttft, 50),
        totalP50: ratio(seen.gate.total, seen.direct.total, 50),
        totalP95: ratio(seen.gate.total, seen.direct.total, 95),
      },
      failed: { direct: seen.direct.failed, gate: seen.gate.failed },
    };
    log(
      `${concurrency} at once: TTFT p50 ${row.directMs.ttft.p50} ms direct, ${row.gateMs.ttft.p50} ms through the gate; ` +
        `total p50 ${row.directMs.total.p50} / ${row.gateMs.total.p50} ms (×${row.gateOverDirect.totalP50})`,
    );
    results.push(row);
  }
  console.log(
    JSON.stringify({ machine: machine(), config: { rounds, tokens, tokenDelayMs }, refused, levels: results }, null, 2),
  );
  const ok =
    Object.values(refused).every((status) => status === 403) &&
    results.every((r) => r.failed.direct === 0 && r.failed.gate === 0);
  if (!ok) process.exitCode = 1;
} catch (err) {
  log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exitCode = 1;
} finally {
  nginx.kill('SIGQUIT');
  await new Promise((resolve) => (nginx.exitCode !== null ? resolve(undefined) : nginx.once('exit', resolve)));
  await sim.stop();
  rmSync(prefix, { recursive: true, force: true });
}
