// The kubelet's container probes: httpGet (a status from 200 to 399 passes) and tcpSocket (a connection passes), run
// against the pod's IP. exec probes would need to enter the container; the local agent reports them as failing.
import { connect } from 'node:net';
import type { V1Container, V1Probe } from '@kubernetes/client-node';

export interface ProbeResult {
  ok: boolean;
  /** Why it failed, in the kubelet's words (`Get "http://…": dial tcp …: connect: connection refused`). */
  message?: string;
}

function portOf(container: V1Container, port: number | string | undefined): number | undefined {
  if (typeof port === 'number') return port;
  if (port === undefined) return undefined;
  if (/^\d+$/.test(port)) return Number(port);
  return container.ports?.find((p) => p.name === port)?.containerPort;
}

export async function runProbe(probe: V1Probe, container: V1Container, podIp: string): Promise<ProbeResult> {
  const timeoutMs = (probe.timeoutSeconds ?? 1) * 1000;
  if (probe.httpGet) {
    const get = probe.httpGet;
    const port = portOf(container, get.port);
    const host = get.host || podIp;
    const url = `${(get.scheme ?? 'HTTP').toLowerCase()}://${host}:${port}${get.path ?? '/'}`;
    if (port === undefined) return { ok: false, message: `port ${String(get.port)} is not a port of the container` };
    try {
      const response = await fetch(url, {
        headers: Object.fromEntries((get.httpHeaders ?? []).map((h) => [h.name, h.value])),
        signal: AbortSignal.timeout(timeoutMs),
        redirect: 'manual',
      });
      await response.body?.cancel();
      return response.status >= 200 && response.status < 400
        ? { ok: true }
        : { ok: false, message: `HTTP probe failed with statuscode: ${response.status}` };
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const detail =
        (err as Error).name === 'TimeoutError'
          ? 'context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
          : cause?.code === 'ECONNREFUSED'
            ? `dial tcp ${host}:${port}: connect: connection refused`
            : (cause?.message ?? String(err));
      return { ok: false, message: `Get "${url}": ${detail}` };
    }
  }
  if (probe.tcpSocket) {
    const port = portOf(container, probe.tcpSocket.port);
    const host = probe.tcpSocket.host || podIp;
    if (port === undefined)
      return { ok: false, message: `port ${String(probe.tcpSocket.port)} is not a port of the container` };
    return new Promise((resolve) => {
      const socket = connect({ host, port });
      const done = (result: ProbeResult) => {
        socket.destroy();
        resolve(result);
      };
      socket.setTimeout(timeoutMs, () => done({ ok: false, message: `dial tcp ${host}:${port}: i/o timeout` }));
      socket.once('connect', () => done({ ok: true }));
      socket.once('error', () => done({ ok: false, message: `dial tcp ${host}:${port}: connect: connection refused` }));
    });
  }
  return { ok: false, message: 'exec and grpc probes are not supported by the local node agent' };
}
