import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parsePullerLine, PULLER_SCRIPT, summarizePullerLog } from '../../activities/builders/index.js';

// Runs the real puller script with the local python3 (skipped without one). The Hugging Face path runs against a
// stand-in `huggingface_hub` module, so no network is needed.

const python = spawnSync('python3', ['--version']).status === 0;
const work = mkdtempSync(join(tmpdir(), 'ferry-puller-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const FAKE_HUB = `
import hashlib, http.server, json, os, threading, time

class RepositoryNotFoundError(Exception):
    pass

class GatedRepoError(RepositoryNotFoundError):
    pass

FILES = {'config.json': 20, 'model.safetensors': 3000, 'pytorch_model.bin': 5000, 'original/consolidated.pth': 7000}
# What the fake Hub was asked, one JSON line each, beside DEST.
LOG = os.path.join(os.path.dirname(os.environ['FERRY_DEST']), 'calls.json')

def log(entry):
    os.makedirs(os.path.dirname(LOG), exist_ok=True)
    with open(LOG, 'a') as calls:
        calls.write(json.dumps(entry) + '\\n')

class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        # /<org>/<name>/resolve/<revision>/<path> redirects, as the Hub does for LFS files, to its CDN's
        # /cdn/<org>/<name>/<path>, which sends the bytes.
        parts = self.path.lstrip('/').split('/')
        rng = self.headers.get('Range')
        if parts[0] != 'cdn':
            log({'resolve': '/'.join(parts[4:]), 'auth': self.headers.get('Authorization')})
            self.send_response(302)
            self.send_header('Location', '/cdn/' + parts[0] + '/' + parts[1] + '/' + '/'.join(parts[4:]))
            self.send_header('Content-Length', '0')
            self.end_headers()
            return
        org, name, path = parts[1], parts[2], '/'.join(parts[3:])
        log({'get': path, 'repo': org + '/' + name, 'range': rng, 'auth': self.headers.get('Authorization')})
        if org == 'busy' and not _limited:
            # busy/model: the first download is refused by the rate limit, as the Hub does under load.
            _limited.append(path)
            self.send_response(429)
            self.send_header('Content-Length', '0')
            self.end_headers()
            return
        body = b'x' * FILES[path]
        start = int(rng[len('bytes='):-1]) if rng else 0
        self.send_response(206 if rng else 200)
        self.send_header('Content-Length', str(len(body) - start))
        self.end_headers()
        # In three pieces, a while apart, so that progress is seen.
        rest = body[start:]
        for i in range(3):
            self.wfile.write(rest[i * len(rest) // 3:(i + 1) * len(rest) // 3])
            self.wfile.flush()
            time.sleep(0.05)

    def log_message(self, *args):
        pass

_limited = []
_server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Handler)
threading.Thread(target=_server.serve_forever, daemon=True).start()

class _Sibling:
    def __init__(self, name):
        self.rfilename = name

class _Info:
    sha = 'c0ffee'
    def __init__(self):
        self.siblings = [_Sibling(n) for n in FILES]

class HfApi:
    def model_info(self, repo, revision=None):
        if repo == 'gated/model':
            raise GatedRepoError('401 gated')
        if repo == 'missing/model':
            raise RepositoryNotFoundError('404 not found')
        return _Info()

class _Metadata:
    def __init__(self, etag, size):
        self.etag, self.size = etag, size

def hf_hub_url(repo, filename, revision=None):
    return 'http://127.0.0.1:' + str(_server.server_address[1]) + '/' + repo + '/resolve/' + revision + '/' + filename

def get_hf_file_metadata(url):
    # As the Hub answers: the SHA-256 of an LFS file's content, the git blob id of any other; for corrupt/model the
    # weights' digest is another file's.
    org, name_, _resolve, revision, name = url.split('/', 3)[3].split('/', 4)
    repo = org + '/' + name_
    log({'head': name, 'revision': revision})
    body = b'x' * FILES[name]
    if name.endswith('.safetensors'):
        etag = '"' + hashlib.sha256(body + (b'!' if repo == 'corrupt/model' else b'')).hexdigest() + '"'
    elif name.endswith('.json') and repo == 'weak/model':
        etag = 'W/"not-a-digest"'
    else:
        etag = hashlib.sha1(b'blob ' + str(len(body)).encode() + b'\\0' + body).hexdigest()
    return _Metadata(etag, len(body))
`;

function run(env: Record<string, string>) {
  const result = spawnSync('python3', ['-c', PULLER_SCRIPT], {
    env: { PATH: process.env.PATH ?? '', FERRY_PROGRESS_INTERVAL: '0.05', ...env },
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr, ...summarizePullerLog(result.stdout) };
}

describe.skipIf(!python)('puller script', () => {
  const hub = join(work, 'hub');
  mkdirSync(join(hub, 'huggingface_hub'), { recursive: true });
  writeFileSync(join(hub, 'huggingface_hub', '__init__.py'), FAKE_HUB);

  /** The puller for `repo` on the stand-in Hub, into `dest`. */
  const pullHf = (repo: string, dest: string, env: Record<string, string> = {}) =>
    run({ PYTHONPATH: hub, FERRY_SOURCE_KIND: 'huggingface', FERRY_HF_REPO: repo, FERRY_DEST: dest, ...env });
  /** What the stand-in Hub was asked by the pullers whose DEST is in `dir`, in order. */
  const hubCalls = (dir: string) =>
    readFileSync(join(work, dir, 'calls.json'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, string | null>);

  it('copies a pvc source into DEST, marks it complete and reports progress', () => {
    const source = join(work, 'source', 'run-42', 'step-1000');
    mkdirSync(join(source, 'nested'), { recursive: true });
    writeFileSync(join(source, 'config.json'), '{}');
    writeFileSync(join(source, 'nested', 'model.safetensors'), Buffer.alloc(4096));
    const dest = join(work, 'models', 'aaaa1111');
    const env = { FERRY_SOURCE_KIND: 'pvc', FERRY_SOURCE_PATH: source, FERRY_DEST: dest, FERRY_SOURCE: 'pvc:c/p' };

    const first = run(env);
    expect(first.status, first.stderr).toBe(0);
    expect(first.done).toEqual({ type: 'done', dest, bytes: expect.any(Number), skipped: false });
    expect(first.progress).toEqual({ type: 'progress', bytes: first.done!.bytes, totalBytes: first.done!.bytes });
    expect(readFileSync(join(dest, 'nested', 'model.safetensors')).length).toBe(4096);
    expect(JSON.parse(readFileSync(join(dest, '.ferry-complete'), 'utf8'))).toMatchObject({ source: 'pvc:c/p' });
    expect(existsSync(`${dest}.partial`)).toBe(false);

    const again = run(env);
    expect(again.status).toBe(0);
    expect(again.done?.skipped).toBe(true);
  });

  it('keeps what an earlier attempt copied whole, copies the rest, and drops files the source no longer has', () => {
    const source = join(work, 'source-resume');
    mkdirSync(source, { recursive: true });
    writeFileSync(join(source, 'a.safetensors'), Buffer.alloc(8192, 1));
    writeFileSync(join(source, 'b.safetensors'), Buffer.alloc(8192, 2));
    const dest = join(work, 'resume-models', 'eeee5555');
    const partial = `${dest}.partial`;
    mkdirSync(partial, { recursive: true });
    // The attempt before: a.safetensors whole (with the source's times, as copy2 leaves it), b cut short, a stray file.
    const then = new Date('2026-01-02T03:04:05Z');
    utimesSync(join(source, 'a.safetensors'), then, then);
    copyFileSync(join(source, 'a.safetensors'), join(partial, 'a.safetensors'));
    utimesSync(join(partial, 'a.safetensors'), then, then);
    writeFileSync(join(partial, 'b.safetensors'), Buffer.alloc(100, 2));
    writeFileSync(join(partial, 'stale.bin'), 'x');
    const result = run({ FERRY_SOURCE_KIND: 'pvc', FERRY_SOURCE_PATH: source, FERRY_DEST: dest });
    expect(result.status, result.stderr).toBe(0);
    // Not written again: a copy would carry this run's time.
    expect(statSync(join(dest, 'a.safetensors')).mtimeMs).toBe(then.getTime());
    expect(readFileSync(join(dest, 'b.safetensors')).equals(Buffer.alloc(8192, 2))).toBe(true);
    expect(readdirSync(dest).sort()).toEqual(['.ferry-complete', 'a.safetensors', 'b.safetensors']);
  });

  it('deletes the weights of earlier sources once the new ones are complete, and nothing else', () => {
    const source = join(work, 'source-prune');
    mkdirSync(source, { recursive: true });
    writeFileSync(join(source, 'config.json'), '{}');
    const models = join(work, 'prune-models');
    for (const dir of ['abcd0000', 'abcd0001.partial', 'lost+found', 'notes'])
      mkdirSync(join(models, dir), { recursive: true });
    const dest = join(models, 'cccc3333');
    const env = { FERRY_SOURCE_KIND: 'pvc', FERRY_SOURCE_PATH: source, FERRY_DEST: dest };

    const kept = run({ ...env, FERRY_SOURCE_PATH: join(work, 'missing') });
    expect(kept.status).toBe(1);
    expect(readdirSync(models).sort()).toEqual(['abcd0000', 'abcd0001.partial', 'lost+found', 'notes']);

    const result = run(env);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain('FERRY_PRUNED {"removed": ["abcd0000", "abcd0001.partial"]}');
    expect(readdirSync(models).sort()).toEqual(['cccc3333', 'lost+found', 'notes']);
  });

  it('fails visibly when the pvc path does not exist', () => {
    const result = run({
      FERRY_SOURCE_KIND: 'pvc',
      FERRY_SOURCE_PATH: join(work, 'nope'),
      FERRY_DEST: join(work, 'm', 'x'),
    });
    expect(result.status).toBe(1);
    expect(result.error).toMatchObject({
      reason: 'SourceNotFound',
      message: expect.stringContaining('source.pvc.path'),
    });
  });

  it('downloads from the hub with progress, skipping duplicate weight formats', () => {
    const dest = join(work, 'hf-models', 'bbbb2222');
    const result = pullHf('Qwen/Qwen2.5-0.5B-Instruct', dest, { FERRY_HF_REVISION: 'main', HF_TOKEN: 'hf_secret' });
    expect(result.status, result.stderr).toBe(0);
    const progress = result.stdout
      .split('\n')
      .map(parsePullerLine)
      .filter((e) => e?.type === 'progress');
    expect(progress.length).toBeGreaterThan(2);
    expect(progress[0]).toEqual({ type: 'progress', bytes: 0, totalBytes: 3020 });
    // Each later line has the rate over the interval before it.
    expect(progress.slice(1, -1).every((p) => typeof p?.bytesPerSecond === 'number')).toBe(true);
    expect(result.stdout).toContain('"verified": 2, "unverified": 0');
    expect(readdirSync(dest).sort()).toEqual(['.ferry-complete', 'config.json', 'model.safetensors']);
    const calls = hubCalls('hf-models');
    // The files of the commit the revision names, the other weight formats left out.
    expect(calls.filter((c) => c.head)).toEqual([
      { head: 'config.json', revision: 'c0ffee' },
      { head: 'model.safetensors', revision: 'c0ffee' },
    ]);
    // The token to the Hub; not to the CDN it redirects to.
    expect(calls.filter((c) => c.resolve || c.get)).toEqual([
      { resolve: 'config.json', auth: 'Bearer hf_secret' },
      { get: 'config.json', repo: 'Qwen/Qwen2.5-0.5B-Instruct', range: null, auth: null },
      { resolve: 'model.safetensors', auth: 'Bearer hf_secret' },
      { get: 'model.safetensors', repo: 'Qwen/Qwen2.5-0.5B-Instruct', range: null, auth: null },
    ]);
    expect(result.stdout).not.toContain('hf_secret');
  });

  it.each([
    ['gated/model', 'AccessDenied', 'tokenSecret'],
    ['missing/model', 'SourceNotFound', 'does not exist'],
  ])('classifies a failure for %s as %s', (repo, reason, hint) => {
    const result = run({
      PYTHONPATH: hub,
      FERRY_SOURCE_KIND: 'huggingface',
      FERRY_HF_REPO: repo,
      FERRY_DEST: join(work, 'fail', repo.replace('/', '-')),
    });
    expect(result.status).toBe(1);
    expect(result.error).toMatchObject({ reason, message: expect.stringContaining(hint) });
  });

  it('fails with WeightsCorrupt, naming the file, when a file is not what the Hub states; counts ETags that are no digest', () => {
    const dest = join(work, 'corrupt-models', 'dddd4444');
    const env = { PYTHONPATH: hub, FERRY_SOURCE_KIND: 'huggingface', FERRY_HF_REVISION: 'v1', FERRY_DEST: dest };
    const corrupt = run({ ...env, FERRY_HF_REPO: 'corrupt/model' });
    expect(corrupt.status).toBe(1);
    // Downloaded whole just now, so not fetched again: refused.
    expect(corrupt.stdout).not.toContain('FERRY_REFETCH');
    expect(corrupt.error?.reason).toBe('WeightsCorrupt');
    expect(corrupt.error?.message).toContain('model.safetensors is not the file of corrupt/model@v1: sha256 ');
    expect(existsSync(dest)).toBe(false);
    expect(existsSync(join(`${dest}.partial`, 'model.safetensors'))).toBe(false);

    const weak = run({ ...env, FERRY_HF_REPO: 'weak/model' });
    expect(weak.status, weak.stderr).toBe(0);
    expect(weak.stdout).toContain('"verified": 1, "unverified": 1');
  }, 20_000);

  it.each([
    ['continues', 'x', []],
    ['fetches again, whole, when the check fails', 'y', ['bytes=1000-', null]],
  ])('%s a file an earlier attempt began', (_what, fill, refetched) => {
    const dest = join(work, `resumed-${fill}`, 'eeee5555');
    // The attempt before left a third of the weights (in a damaged copy, "y"s where the Hub has "x"s).
    mkdirSync(`${dest}.partial`, { recursive: true });
    writeFileSync(join(`${dest}.partial`, 'model.safetensors'), fill.repeat(1000));
    const result = pullHf('org/model', dest, { FERRY_HF_REVISION: 'v1' });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain('"verified": 2, "unverified": 0');
    expect(readFileSync(join(dest, 'model.safetensors'), 'utf8')).toBe('x'.repeat(3000));
    const gets = hubCalls(`resumed-${fill}`)
      .filter((c) => c.get === 'model.safetensors')
      .map((c) => c.range);
    if (refetched.length) {
      expect(result.stdout).toContain('FERRY_REFETCH {"files": ["model.safetensors"]');
      expect(gets).toEqual(refetched);
    } else {
      expect(result.stdout).not.toContain('FERRY_REFETCH');
      expect(gets).toEqual(['bytes=1000-']);
    }
  });

  it('waits out a 429 of the Hub and goes on', () => {
    const dest = join(work, 'busy-models', 'abcd1234');
    const result = pullHf('busy/model', dest, { FERRY_RETRY_PAUSE: '0.01' });
    expect(result.status, result.stdout).toBe(0);
    const gets = hubCalls('busy-models').filter((c) => c.get);
    // config.json refused once and asked again, then model.safetensors.
    expect(gets.map((c) => c.get)).toEqual(['config.json', 'config.json', 'model.safetensors']);
    expect(readdirSync(dest).sort()).toEqual(['.ferry-complete', 'config.json', 'model.safetensors']);
  });

  it('says so when the image has no huggingface_hub', () => {
    const broken = join(work, 'broken');
    mkdirSync(join(broken, 'huggingface_hub'), { recursive: true });
    writeFileSync(join(broken, 'huggingface_hub', '__init__.py'), "raise ImportError('not installed')\n");
    const result = run({
      PYTHONPATH: broken,
      FERRY_SOURCE_KIND: 'huggingface',
      FERRY_HF_REPO: 'a/b',
      FERRY_DEST: join(work, 'none', 'x'),
    });
    expect(result.status).toBe(1);
    expect(result.error?.reason).toBe('PullerImageInvalid');
  });
});

describe('parsePullerLine', () => {
  it('reads the three kinds of line and ignores the rest', () => {
    expect(parsePullerLine('FERRY_PROGRESS {"bytes": 10, "totalBytes": null}')).toEqual({
      type: 'progress',
      bytes: 10,
      totalBytes: null,
    });
    expect(parsePullerLine('FERRY_ERROR {"reason": "NoSpace", "message": "full"}')).toEqual({
      type: 'error',
      reason: 'NoSpace',
      message: 'full',
    });
    expect(parsePullerLine('FERRY_DONE {"dest": "/models/x", "bytes": 5, "skipped": true}')).toEqual({
      type: 'done',
      dest: '/models/x',
      bytes: 5,
      skipped: true,
    });
    expect(parsePullerLine('Fetching 4 files')).toBeUndefined();
    expect(parsePullerLine('FERRY_PROGRESS {not json}')).toBeUndefined();
  });
});
