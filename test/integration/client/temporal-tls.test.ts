// Temporal behind TLS, reached the two ways Temporal Cloud offers and many self-hosted clusters use, configured only
// through Temporal's own variables: a client certificate (TEMPORAL_TLS_*), or an API key (TEMPORAL_API_KEY). The dev
// server speaks plaintext and checks nothing, so a gatekeeper stands in front of it: for mTLS a TLS terminator that
// demands a client certificate signed by the test's CA and relays the bytes; for API keys an HTTP/2 proxy over TLS
// that answers gRPC UNAUTHENTICATED unless the request carries the key, and relays each call otherwise. The CLI and
// the worker process are the real ones.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server, type TLSSocket } from 'node:tls';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasWorker } from '../../../client/model-status.js';
import { startWorkerProcess, uniqueCluster } from '../../support/e2e.js';
import { eventually, runFerry } from '../../support/ferry-worker.js';
import { startGrpcRelay, type GrpcRelay } from '../../support/grpc-relay.js';
import { readLocalEnv } from '../../support/local-env.js';

const dir = mkdtempSync(join(tmpdir(), 'ferry-tls-'));
const file = (name: string) => join(dir, name);
let server: Server;
let address: string;
let keyGate: GrpcRelay;
let keyAddress: string;
const apiKey = `ferry-test-key-${randomBytes(12).toString('hex')}`;
/** Calls the API-key proxy let through, and calls it refused. */
const calls = {
  get allowed() {
    return keyGate.calls.filter((c) => c.admitted).length;
  },
  get refused() {
    return keyGate.calls.filter((c) => !c.admitted).length;
  },
};
/** Common names of the client certificates of accepted connections, and the errors of refused handshakes. */
const accepted: string[] = [];
const refused: string[] = [];
/** Connections still open when the file ends are destroyed, so closing the gatekeepers cannot hang. */
const open = new Set<{ destroy(): void }>();
const track = <T extends { destroy(): void; once(event: 'close', fn: () => void): unknown }>(c: T): T => {
  open.add(c);
  c.once('close', () => open.delete(c));
  return c;
};

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

/** A CA, a certificate signed by it for `cn` (with `ext` as its extensions), and the key of each. */
function issue(ca: string, cn: string, ext: string): void {
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${cn}.key`, '-subj', `/CN=${cn}`, '-out', `${cn}.csr`);
  writeFileSync(file(`${cn}.ext`), ext);
  openssl(
    'x509',
    '-req',
    '-in',
    `${cn}.csr`,
    '-CA',
    `${ca}.crt`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-days',
    '1',
    '-sha256',
    '-extfile',
    `${cn}.ext`,
    '-out',
    `${cn}.crt`,
  );
}

function newCa(name: string): void {
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    `${name}.key`,
    '-subj',
    `/CN=${name}`,
    '-days',
    '1',
    '-sha256',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
    '-out',
    `${name}.crt`,
  );
}

beforeAll(async () => {
  newCa('test-ca');
  newCa('other-ca');
  issue('test-ca', 'temporal.ferry.test', 'subjectAltName=DNS:temporal.ferry.test\nextendedKeyUsage=serverAuth\n');
  issue('test-ca', 'ferry-worker-client', 'extendedKeyUsage=clientAuth\n');
  issue('other-ca', 'stranger', 'extendedKeyUsage=clientAuth\n');

  const [upstreamHost, upstreamPort] = readLocalEnv().TEMPORAL_ADDRESS.split(':') as [string, string];
  server = createServer(
    {
      key: readFileSync(file('temporal.ferry.test.key')),
      cert: readFileSync(file('temporal.ferry.test.crt')),
      ca: readFileSync(file('test-ca.crt')),
      requestCert: true,
      rejectUnauthorized: true,
      ALPNProtocols: ['h2'],
    },
    (socket: TLSSocket) => {
      accepted.push(String(socket.getPeerCertificate().subject?.CN));
      track(socket);
      const upstream = track(connect(Number(upstreamPort), upstreamHost));
      socket.pipe(upstream).pipe(socket);
      const close = () => {
        socket.destroy();
        upstream.destroy();
      };
      socket.on('error', close);
      upstream.on('error', close);
    },
  );
  server.on('tlsClientError', (err) => refused.push(err.message));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  address = `127.0.0.1:${(server.address() as AddressInfo).port}`;

  // An HTTP/2 proxy over TLS that relays gRPC calls carrying `authorization: Bearer <apiKey>` and refuses others.
  keyGate = await startGrpcRelay({
    tls: { key: readFileSync(file('temporal.ferry.test.key')), cert: readFileSync(file('temporal.ferry.test.crt')) },
    admit: (headers) => headers.authorization === `Bearer ${apiKey}`,
  });
  keyAddress = keyGate.address;
}, 60_000);

afterAll(async () => {
  const closed = Promise.all([new Promise((resolve) => server?.close(resolve)), keyGate?.close()]);
  for (const c of open) c.destroy();
  await closed;
  rmSync(dir, { recursive: true, force: true });
});

/** Whether the dev server (asked directly, not through a gatekeeper) sees a poller on the cluster's task queue. */
async function polls(cluster: string): Promise<boolean> {
  const connection = await Connection.connect({ address: readLocalEnv().TEMPORAL_ADDRESS });
  try {
    const client = new Client({ connection });
    return await eventually(
      () => hasWorker(client, `ferry-${cluster}`),
      (seen) => seen,
    );
  } finally {
    await connection.close();
  }
}

/** Temporal's TLS variables for a client presenting `clientCn`'s certificate. */
const tlsEnv = (clientCn: string, caFile = 'test-ca.crt'): Record<string, string> => ({
  TEMPORAL_ADDRESS: address,
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: file(caFile),
  TEMPORAL_TLS_SERVER_NAME: 'temporal.ferry.test',
  TEMPORAL_TLS_CLIENT_CERT_PATH: file(`${clientCn}.crt`),
  TEMPORAL_TLS_CLIENT_KEY_PATH: file(`${clientCn}.key`),
});

describe('Temporal over mutual TLS', () => {
  it('the CLI connects with the client certificate named by TEMPORAL_TLS_*', async () => {
    const before = accepted.length;
    const run = await runFerry(['list', '--cluster', 'tls-nobody', '-o', 'json'], tlsEnv('ferry-worker-client'));
    expect(run, run.stderr).toMatchObject({ code: 0, stdout: '[]\n' });
    expect(accepted.slice(before)).toContain('ferry-worker-client');
  });

  it('`ferry delete --cluster` sends its update, before the SDK loads, with the same certificate', async () => {
    const before = { accepted: accepted.length, refused: refused.length };
    const run = await runFerry(
      ['delete', 'absent', '-n', 'models', '--cluster', 'tls-nobody'],
      tlsEnv('ferry-worker-client'),
    );
    expect(run.code, run.stderr).toBe(3);
    // Two connections, both with the client certificate and the server's name checked: the update's own
    // (client/early-update.ts) and the SDK's. None refused.
    expect(accepted.slice(before.accepted)).toEqual(['ferry-worker-client', 'ferry-worker-client']);
    expect(refused.length).toBe(before.refused);
  });

  it('exits 5 naming the address when the server refuses the certificate, or is not the one trusted', async () => {
    const stranger = await runFerry(['list', '-o', 'json'], tlsEnv('stranger'));
    expect(stranger.code).toBe(5);
    expect(stranger.stderr).toContain(`cannot connect to Temporal at ${address}`);
    expect(refused.length).toBeGreaterThan(0);

    const untrusted = await runFerry(['list', '-o', 'json'], tlsEnv('ferry-worker-client', 'other-ca.crt'));
    expect(untrusted.code).toBe(5);
    expect(untrusted.stderr).toContain(`cannot connect to Temporal at ${address}`);
  });

  it('the worker process polls through it, and never logs the key', async () => {
    const before = accepted.length;
    const worker = await startWorkerProcess(uniqueCluster('tls'), address, tlsEnv('ferry-worker-client'));
    try {
      expect(await polls(worker.cluster), worker.log()).toBe(true);
      expect(accepted.slice(before)).toContain('ferry-worker-client');
      expect(await worker.stop()).toBe(0);
    } finally {
      await worker.kill();
    }
    const keyBody = readFileSync(file('ferry-worker-client.key'), 'utf8').split('\n')[1]!;
    expect(worker.log()).not.toContain(keyBody);
    expect(worker.log()).toContain(file('ferry-worker-client.key')); // the path is logged, the key is not
  }, 120_000);
});

describe('Temporal with an API key over TLS', () => {
  const keyEnv = (key: string): Record<string, string> => ({
    TEMPORAL_ADDRESS: keyAddress,
    TEMPORAL_API_KEY: key,
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: file('test-ca.crt'),
    TEMPORAL_TLS_SERVER_NAME: 'temporal.ferry.test',
  });

  it('the CLI sends TEMPORAL_API_KEY with every call, and a wrong key is refused', async () => {
    const before = { ...calls };
    const run = await runFerry(['list', '--cluster', 'tls-nobody', '-o', 'json'], keyEnv(apiKey));
    expect(run, run.stderr).toMatchObject({ code: 0, stdout: '[]\n' });
    expect(calls.allowed).toBeGreaterThan(before.allowed);
    expect(calls.refused).toBe(before.refused);

    const wrong = await runFerry(['list', '-o', 'json'], keyEnv('not-the-key'));
    expect(wrong.code).toBe(5);
    expect(wrong.stderr.trimEnd()).toBe(
      `error: cannot connect to Temporal at ${keyAddress}: Failed to connect to Temporal server ` +
        '(16 UNAUTHENTICATED: Request unauthorized.); the server refused the credentials: check TEMPORAL_API_KEY, ' +
        'or the client certificate (TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH)',
    );
    expect(wrong.stderr).not.toContain('not-the-key');
    expect(calls.refused).toBeGreaterThan(before.refused);
  });

  it('`ferry delete --cluster` sends its update first, with the key, on a connection of its own', async () => {
    const mark = keyGate.calls.length;
    const run = await runFerry(['delete', 'absent', '-n', 'models', '--cluster', 'key-nobody'], keyEnv(apiKey));
    expect(run.code, run.stderr).toBe(3);
    const [first, ...sdk] = keyGate.calls.slice(mark);
    expect(first).toMatchObject({
      method: 'UpdateWorkflowExecution',
      admitted: true,
      headers: { ':authority': 'temporal.ferry.test', 'temporal-namespace': 'default' },
    });
    expect(sdk.length).toBeGreaterThan(0);
    expect(sdk.every((c) => c.admitted && c.connection !== first!.connection)).toBe(true);

    // A wrong key: the update is refused, and the SDK, asking again, reports it as for any command.
    const wrong = await runFerry(
      ['delete', 'absent', '-n', 'models', '--cluster', 'key-nobody'],
      keyEnv('not-the-key'),
    );
    expect(wrong.code).toBe(5);
    expect(wrong.stderr).toMatch(/the server refused the credentials: check TEMPORAL_API_KEY/);
    expect(wrong.stderr).not.toContain('not-the-key');
  });

  it('the worker process polls with the key, and never logs it', async () => {
    const worker = await startWorkerProcess(uniqueCluster('key'), keyAddress, keyEnv(apiKey));
    try {
      expect(await polls(worker.cluster), worker.log()).toBe(true);
      expect(await worker.stop()).toBe(0);
    } finally {
      await worker.kill();
    }
    expect(worker.log()).toContain('"apiKey":"[redacted]"');
    expect(worker.log()).not.toContain(apiKey);
  }, 120_000);
});
