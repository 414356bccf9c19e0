// Temporal behind TLS with client certificates (how Temporal Cloud's mTLS namespaces and many self-hosted clusters
// are reached), configured only through Temporal's own variables (TEMPORAL_TLS_*). The dev server speaks plaintext,
// so a TLS terminator stands in front of it: it demands a client certificate signed by the test's CA, records who
// connected, and relays the bytes. The CLI and the worker process are the real ones.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server, type TLSSocket } from 'node:tls';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasWorker } from '../../../client/model-status';
import { runFerry } from '../../support/ferry-worker';
import { readLocalEnv, repoRoot } from '../../support/local-env';

const dir = mkdtempSync(join(tmpdir(), 'ferry-tls-'));
const file = (name: string) => join(dir, name);
let server: Server;
let address: string;
/** Common names of the client certificates of accepted connections, and the errors of refused handshakes. */
const accepted: string[] = [];
const refused: string[] = [];

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

/** A CA, a certificate signed by it for `cn` (with `ext` as its extensions), and the key of each. */
function issue(ca: string, cn: string, ext: string): void {
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${cn}.key`, '-subj', `/CN=${cn}`, '-out', `${cn}.csr`);
  writeFileSync(file(`${cn}.ext`), ext);
  openssl(
    'x509', '-req', '-in', `${cn}.csr`, '-CA', `${ca}.crt`, '-CAkey', `${ca}.key`, '-CAcreateserial',
    '-days', '1', '-sha256', '-extfile', `${cn}.ext`, '-out', `${cn}.crt`,
  );
}

function newCa(name: string): void {
  openssl(
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-subj', `/CN=${name}`,
    '-days', '1', '-sha256', '-addext', 'basicConstraints=critical,CA:TRUE',
    '-addext', 'keyUsage=critical,keyCertSign,cRLSign', '-out', `${name}.crt`,
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
      const upstream = connect(Number(upstreamPort), upstreamHost);
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
}, 60_000);

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

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
    const cluster = `tls-${randomBytes(4).toString('hex')}`;
    const child = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'worker', 'main.ts')], {
      cwd: repoRoot,
      env: {
        PATH: process.env.PATH,
        HOME: dir,
        KUBECONFIG: readLocalEnv().KUBECONFIG,
        FERRY_CLUSTER: cluster,
        FERRY_SHUTDOWN_GRACE: '2s',
        ...tlsEnv('ferry-worker-client'),
      },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    const before = accepted.length;
    const connection = await Connection.connect({ address: readLocalEnv().TEMPORAL_ADDRESS });
    try {
      const client = new Client({ connection });
      let polled = false;
      for (let i = 0; i < 450 && !polled && child.exitCode === null; i++) {
        polled = await hasWorker(client, `ferry-${cluster}`);
        if (!polled) await new Promise((r) => setTimeout(r, 200));
      }
      expect(polled, `${stdout}\n${stderr}`).toBe(true);
      expect(accepted.slice(before)).toContain('ferry-worker-client');
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await connection.close();
    }
    const key = readFileSync(file('ferry-worker-client.key'), 'utf8');
    const keyBody = key.split('\n')[1]!;
    expect(stdout).not.toContain(keyBody);
    expect(stdout).toContain(file('ferry-worker-client.key')); // the path is logged, the key is not
  }, 120_000);
});
