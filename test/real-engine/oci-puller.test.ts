// The puller's OCI source against a real registry: the local stack's CNCF distribution registry (deploy/local/registry)
// with htpasswd authentication, through the front that counts the blob bytes it serves. The puller's program runs here
// as a process, as the Job's container would run it; each test pushes the tiny Llama to a repository of its own.
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RegistryClient } from '../../deploy/local/registry/client.js';
import {
  realEngineMissing,
  REGISTRY,
  REGISTRY_DATA,
  registryAuth,
  registryServed,
  repoFiles,
  runPuller,
  type PullerRun,
} from './support.js';

const missing = realEngineMissing();
const WEIGHTS = 'model.safetensors';

/** An entry of an image layer: a file's content, a directory (null), or a symbolic link to a path. */
type Entry = Buffer | null | { symlink: string };

/** A tar archive of `entries` (name → entry), as image builders write them, made by Python's tarfile. */
function tarOf(entries: [string, Entry][], gzip = true): Buffer {
  const script = `
import base64, io, json, sys, tarfile
out = io.BytesIO()
with tarfile.open(fileobj=out, mode='w:gz' if sys.argv[1] == 'gz' else 'w') as tar:
    for name, entry in json.load(sys.stdin):
        info = tarfile.TarInfo(name)
        if entry is None:
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        elif isinstance(entry, dict):
            info.type, info.linkname = tarfile.SYMTYPE, entry['symlink']
            tar.addfile(info)
        else:
            body = base64.b64decode(entry)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
sys.stdout.buffer.write(out.getvalue())
`;
  const json = entries.map(([name, e]) => [name, Buffer.isBuffer(e) ? e.toString('base64') : e]);
  return execFileSync('python3', ['-c', script, gzip ? 'gz' : 'tar'], {
    input: JSON.stringify(json),
    maxBuffer: 1 << 28,
  });
}

/** Every file under `dir`, by its path relative to it. */
function tree(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => !e.isDirectory())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
    .sort();
}

describe.skipIf(missing)(`the puller's oci source on a real registry${missing ? ` (skipped: ${missing})` : ''}`, () => {
  const work = mkdtempSync(join(tmpdir(), 'ferry-oci-puller-'));
  const files = missing ? new Map<string, Buffer>() : repoFiles('ferry-local/tiny-llama', 'v1');
  const size = [...files.values()].reduce((sum, b) => sum + b.length, 0);
  const auth = missing ? { username: '', password: '' } : registryAuth();
  const client = new RegistryClient(`http://${REGISTRY}`, auth);
  const prefix = `puller-${randomBytes(4).toString('hex')}`;
  const docker = (password = auth.password) =>
    JSON.stringify({ auths: { [REGISTRY]: { auth: Buffer.from(`${auth.username}:${password}`).toString('base64') } } });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  /** The tiny Llama as the artifact `<prefix>/<name>:v1`; its repository. */
  async function push(name: string, content = files): Promise<string> {
    const repository = `${prefix}/${name}`;
    await client.pushArtifact(repository, 'v1', content);
    return repository;
  }

  const pull = (dest: string, reference: string, env: Record<string, string> = {}): Promise<PullerRun> =>
    runPuller({
      FERRY_SOURCE_KIND: 'oci',
      FERRY_DEST: dest,
      FERRY_OCI_REFERENCE: reference,
      FERRY_OCI_PLAIN_HTTP: '1',
      FERRY_OCI_AUTH: docker(),
      ...env,
    });

  const servedBytes = async (repository: string) =>
    Object.values(await registryServed(repository)).reduce((sum, n) => sum + n, 0);

  it('downloads every layer as its file, checks each by digest, and marks the weights complete', async () => {
    const repository = await push('whole');
    const dest = join(work, 'whole/aaaaaaaa');
    mkdirSync(join(work, 'whole'));
    const result = await pull(dest, `${REGISTRY}/${repository}:v1`);
    expect(result.error, result.output).toBeUndefined();
    expect(result.done).toMatchObject({ skipped: false, bytes: size, verified: files.size });
    for (const [path, body] of files) expect(readFileSync(join(dest, path)).equals(body), path).toBe(true);
    expect(result.events.find((e) => e.type === 'progress')).toEqual({ type: 'progress', bytes: 0, totalBytes: size });
    expect(await servedBytes(repository)).toBe(size);
  });

  it('pulls by digest, and refuses a manifest that is not the one the digest names', async () => {
    const repository = `${prefix}/pinned`;
    const digest = await client.pushArtifact(repository, 'v1', files);
    mkdirSync(join(work, 'pinned'));
    const pinned = await pull(join(work, 'pinned/bbbbbbbb'), `${REGISTRY}/${repository}@${digest}`);
    expect(pinned.error, pinned.output).toBeUndefined();
    expect(pinned.done).toMatchObject({ verified: files.size });
    const other = `sha256:${'0'.repeat(64)}`;
    const wrong = await pull(join(work, 'pinned/cccccccc'), `${REGISTRY}/${repository}@${other}`);
    expect(wrong.error?.reason).toBe('SourceNotFound');
  });

  it('continues what an earlier attempt left, fetching only the rest', async () => {
    const repository = await push('resume');
    const dest = join(work, 'resume/dddddddd');
    const weights = files.get(WEIGHTS)!;
    const half = Math.floor(weights.length / 2);
    mkdirSync(`${dest}.partial`, { recursive: true });
    writeFileSync(join(`${dest}.partial`, WEIGHTS), weights.subarray(0, half));
    writeFileSync(join(`${dest}.partial`, 'config.json'), files.get('config.json')!);
    const result = await pull(dest, `${REGISTRY}/${repository}:v1`);
    expect(result.error, result.output).toBeUndefined();
    for (const [path, body] of files) expect(readFileSync(join(dest, path)).equals(body), path).toBe(true);
    expect(await servedBytes(repository)).toBe(size - half - files.get('config.json')!.length);
  });

  it('fails with WeightsCorrupt, naming the file, when the registry serves other bytes than the digest', async () => {
    const body = randomBytes(4096);
    const repository = await push('corrupt', new Map([[WEIGHTS, body]]));
    // Damage the blob where the registry keeps it: the same size, other bytes.
    const hex = createHash('sha256').update(body).digest('hex');
    const stored = join(REGISTRY_DATA, 'docker/registry/v2/blobs/sha256', hex.slice(0, 2), hex, 'data');
    const bytes = readFileSync(stored);
    bytes[100] = bytes[100]! ^ 0xff;
    writeFileSync(stored, bytes);
    const dest = join(work, 'corrupt/eeeeeeee');
    mkdirSync(join(work, 'corrupt'));
    const result = await pull(dest, `${REGISTRY}/${repository}:v1`);
    expect(result.code).toBe(1);
    expect(result.error?.reason).toBe('WeightsCorrupt');
    expect(result.error?.message).toContain(`${WEIGHTS} is not the layer sha256:${hex}`);
    expect(existsSync(dest)).toBe(false);
    expect(existsSync(join(`${dest}.partial`, WEIGHTS))).toBe(false);
  });

  it('reads an image: the files under /models of its layers in order, whiteouts honoured, nothing else', async () => {
    const repository = `${prefix}/image`;
    const base = tarOf([
      ['./etc/hostname', Buffer.from('image\n')],
      ['./models', null],
      ...[...files].map(([path, body]): [string, Entry] => [`./models/${path}`, body]),
      ['./models/stale.bin', Buffer.from('an earlier checkpoint')],
      ['./models/old/a.bin', Buffer.from('a')],
      ['models/../../escaped', Buffer.from('outside')],
      ['./models/passwd', { symlink: '/etc/passwd' }],
    ]);
    const top = tarOf([
      ['./models/.wh.stale.bin', Buffer.alloc(0)],
      ['./models/old/.wh..wh..opq', Buffer.alloc(0)],
      ['./models/extra.txt', Buffer.from('added by the second layer')],
    ]);
    await client.pushImage(repository, 'v1', [base, top]);
    mkdirSync(join(work, 'image'));
    const dest = join(work, 'image/abababab');
    const result = await pull(dest, `${REGISTRY}/${repository}:v1`);
    expect(result.error, result.output).toBeUndefined();
    expect(tree(dest)).toEqual(['.ferry-complete', 'extra.txt', ...files.keys()].sort());
    for (const [path, body] of files) expect(readFileSync(join(dest, path)).equals(body), path).toBe(true);
    expect(result.done).toMatchObject({ skipped: false, verified: files.size + 1 });
    // Progress counts the layers' blobs, as the registry serves them.
    expect(result.events.find((e) => e.type === 'progress')).toMatchObject({ totalBytes: base.length + top.length });
    expect(await servedBytes(repository)).toBe(base.length + top.length);
    expect(existsSync(`${dest}.layers`)).toBe(false);
    expect(tree(work).filter((p) => p.includes('escaped'))).toEqual([]);
  });

  it('reads the directory source.oci.path names, from plain tar layers; an image with nothing there is refused', async () => {
    const repository = `${prefix}/image-path`;
    await client.pushImage(repository, 'v1', [tarOf([['opt/weights/qwen/config.json', Buffer.from('{}')]], false)]);
    mkdirSync(join(work, 'image-path'));
    const dest = join(work, 'image-path/cdcdcdcd');
    const found = await pull(dest, `${REGISTRY}/${repository}:v1`, { FERRY_OCI_PATH: '/opt/weights/qwen' });
    expect(found.error, found.output).toBeUndefined();
    expect(readFileSync(join(dest, 'config.json'), 'utf8')).toBe('{}');
    const none = await pull(join(work, 'image-path/efefefef'), `${REGISTRY}/${repository}:v1`);
    expect(none.error).toMatchObject({
      reason: 'SourceNotFound',
      message: expect.stringContaining('no files under /models'),
    });
  });

  it('names what is wrong with the source', async () => {
    const repository = await push('errors');
    const dest = join(work, 'errors/ffffffff');
    mkdirSync(join(work, 'errors'));
    const noTag = await pull(dest, `${REGISTRY}/${repository}:v9`);
    expect(noTag.error?.reason).toBe('SourceNotFound');
    expect(noTag.error?.message).toContain('MANIFEST_UNKNOWN');
    const wrongPassword = await pull(dest, `${REGISTRY}/${repository}:v1`, { FERRY_OCI_AUTH: docker('not-it') });
    expect(wrongPassword.error?.reason).toBe('SourceForbidden');
    expect(wrongPassword.output).not.toContain(auth.password);
    const anonymous = await pull(dest, `${REGISTRY}/${repository}:v1`, { FERRY_OCI_AUTH: '' });
    expect(anonymous.error?.reason).toBe('SourceForbidden');
    const nowhere = await pull(dest, `127.0.0.1:9/${repository}:v1`);
    expect(nowhere.error?.reason).toBe('SourceUnreachable');
    for (const r of [noTag, wrongPassword, anonymous, nowhere]) expect(r.code).toBe(1);
  });
});
