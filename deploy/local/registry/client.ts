// A small OCI registry client for the local stack and its tests: pushes files as an artifact the way `oras push` does
// (one layer per file, named by org.opencontainers.image.title; an empty config), or tar layers as an image, over the
// distribution API with Basic authentication. Ferry's puller has its own client in Python (activities/builders/puller-oci.ts).
import { createHash } from 'node:crypto';

const ARTIFACT_TYPE = 'application/vnd.ferry.weights.v1';
const LAYER = 'application/vnd.oci.image.layer.v1.tar';
const EMPTY = 'application/vnd.oci.empty.v1+json';
const MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const IMAGE_CONFIG = 'application/vnd.oci.image.config.v1+json';

const sha256 = (body: Buffer) => `sha256:${createHash('sha256').update(body).digest('hex')}`;

export class RegistryClient {
  constructor(
    /** http://host:port */
    private readonly base: string,
    private readonly auth?: { username: string; password: string },
  ) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const basic = this.auth && Buffer.from(`${this.auth.username}:${this.auth.password}`).toString('base64');
    return { ...(basic ? { authorization: `Basic ${basic}` } : {}), ...extra };
  }

  private async check(res: Response, what: string): Promise<Response> {
    if (res.status >= 300) throw new Error(`${what}: ${res.status} ${(await res.text()).slice(0, 300)}`);
    return res;
  }

  /** Puts a blob (once: a blob the repository has is not sent again); returns its descriptor. */
  async putBlob(repository: string, body: Buffer): Promise<{ digest: string; size: number }> {
    const digest = sha256(body);
    const head = await fetch(`${this.base}/v2/${repository}/blobs/${digest}`, {
      method: 'HEAD',
      headers: this.headers(),
    });
    if (head.status === 200) return { digest, size: body.length };
    const started = await this.check(
      await fetch(`${this.base}/v2/${repository}/blobs/uploads/`, { method: 'POST', headers: this.headers() }),
      `starting an upload to ${repository}`,
    );
    const location = new URL(started.headers.get('location')!, this.base);
    location.searchParams.set('digest', digest);
    await this.check(
      await fetch(location, {
        method: 'PUT',
        headers: this.headers({ 'content-type': 'application/octet-stream' }),
        body,
      }),
      `uploading ${digest}`,
    );
    return { digest, size: body.length };
  }

  /** Pushes files (path → content) as an artifact tagged `tag`; returns the manifest's digest. */
  async pushArtifact(repository: string, tag: string, files: Map<string, Buffer>): Promise<string> {
    const config = await this.putBlob(repository, Buffer.from('{}'));
    const layers = [];
    for (const [path, body] of files) {
      const blob = await this.putBlob(repository, body);
      layers.push({ mediaType: LAYER, ...blob, annotations: { 'org.opencontainers.image.title': path } });
    }
    return this.putManifest(repository, tag, {
      artifactType: ARTIFACT_TYPE,
      config: { mediaType: EMPTY, ...config },
      layers,
    });
  }

  /** Pushes tar archives (gzip-compressed when `gzip`) as the layers of a linux/amd64 image tagged `tag`. */
  async pushImage(repository: string, tag: string, tars: Buffer[], gzip = true): Promise<string> {
    const image = { architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: [] }, config: {} };
    const config = await this.putBlob(repository, Buffer.from(JSON.stringify(image)));
    const layers = [];
    for (const tar of tars)
      layers.push({ mediaType: gzip ? `${LAYER}+gzip` : LAYER, ...(await this.putBlob(repository, tar)) });
    return this.putManifest(repository, tag, { config: { mediaType: IMAGE_CONFIG, ...config }, layers });
  }

  private async putManifest(repository: string, tag: string, body: object): Promise<string> {
    const manifest = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MANIFEST, ...body }));
    await this.check(
      await fetch(`${this.base}/v2/${repository}/manifests/${tag}`, {
        method: 'PUT',
        headers: this.headers({ 'content-type': MANIFEST }),
        body: manifest,
      }),
      `putting the manifest ${repository}:${tag}`,
    );
    return sha256(manifest);
  }
}
