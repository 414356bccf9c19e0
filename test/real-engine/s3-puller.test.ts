// The puller's S3 source against a real S3 server: the local stack's versitygw (deploy/local/s3), through the front
// that counts the bytes it serves. The puller's program runs here as a process, as the Job's container would run it,
// with the tiny Llama's files put in a bucket of each test's own.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3Client } from '../../deploy/local/s3/client.js';
import {
  realEngineMissing,
  repoFiles,
  runPuller,
  S3_DATA,
  S3_STORE,
  s3Keys,
  s3Served,
  type PullerRun,
} from './support.js';

const missing = realEngineMissing();
const WEIGHTS = 'model.safetensors';

/** Runs the puller's program for `bucket`/`prefix` into `dest`, as the Job's container would. */
function pull(dest: string, s3: Record<string, string>): Promise<PullerRun> {
  const keys = s3Keys();
  return runPuller({
    FERRY_SOURCE_KIND: 's3',
    FERRY_DEST: dest,
    FERRY_S3_ENDPOINT: S3_STORE,
    FERRY_S3_REGION: 'us-east-1',
    FERRY_S3_ADDRESSING: 'path',
    AWS_ACCESS_KEY_ID: keys.accessKeyId,
    AWS_SECRET_ACCESS_KEY: keys.secretAccessKey,
    ...s3,
  });
}

describe.skipIf(missing)(`the puller's s3 source on a real S3 server${missing ? ` (skipped: ${missing})` : ''}`, () => {
  const work = mkdtempSync(join(tmpdir(), 'ferry-s3-puller-'));
  const files = missing ? new Map<string, Buffer>() : repoFiles('ferry-local/tiny-llama', 'v1');
  const size = [...files.values()].reduce((sum, b) => sum + b.length, 0);
  const client = new S3Client({
    endpoint: S3_STORE,
    ...(missing ? { accessKeyId: '', secretAccessKey: '' } : s3Keys()),
  });
  const bucket = `puller-${randomBytes(4).toString('hex')}`;

  /** The tiny Llama under `prefix` of the test's bucket. */
  async function seed(prefix: string): Promise<void> {
    for (const [path, body] of files) await client.putObject(bucket, `${prefix}/${path}`, body);
  }

  const served = async (prefix: string) =>
    Object.entries(await s3Served(bucket))
      .filter(([key]) => key.startsWith(`${prefix}/`))
      .reduce((sum, [, n]) => sum + n, 0);

  beforeAll(async () => {
    await client.createBucket(bucket);
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('downloads every object under the prefix, verifies each, and marks the weights complete', async () => {
    await seed('whole');
    const dest = join(work, 'whole/aaaaaaaa');
    mkdirSync(join(work, 'whole'));
    const result = await pull(dest, { FERRY_S3_BUCKET: bucket, FERRY_S3_PREFIX: 'whole' });
    expect(result.error, result.output).toBeUndefined();
    expect(result.done).toMatchObject({ skipped: false, bytes: size, verified: files.size, unverified: 0 });
    for (const [path, body] of files) expect(readFileSync(join(dest, path)).equals(body), path).toBe(true);
    expect(existsSync(join(dest, '.ferry-complete'))).toBe(true);
    const progress = result.events.filter((e) => e.type === 'progress');
    expect(progress[0]).toEqual({ type: 'progress', bytes: 0, totalBytes: size });
    expect(progress.at(-1)).toEqual({ type: 'progress', bytes: size, totalBytes: size });
    expect(await served('whole')).toBe(size);
    // A second run finds the weights complete and asks the store for nothing.
    const again = await pull(dest, { FERRY_S3_BUCKET: bucket, FERRY_S3_PREFIX: 'whole' });
    expect(again.done).toMatchObject({ skipped: true });
    expect(await served('whole')).toBe(size);
  });

  it('continues what an earlier attempt left, fetching only the rest', async () => {
    await seed('resume');
    const dest = join(work, 'resume/bbbbbbbb');
    const weights = files.get(WEIGHTS)!;
    const half = Math.floor(weights.length / 2);
    mkdirSync(`${dest}.partial`, { recursive: true });
    writeFileSync(join(`${dest}.partial`, WEIGHTS), weights.subarray(0, half));
    // A file the attempt before finished: checked, and kept.
    writeFileSync(join(`${dest}.partial`, 'config.json'), files.get('config.json')!);
    const result = await pull(dest, { FERRY_S3_BUCKET: bucket, FERRY_S3_PREFIX: 'resume' });
    expect(result.error, result.output).toBeUndefined();
    expect(result.done).toMatchObject({ verified: files.size });
    for (const [path, body] of files) expect(readFileSync(join(dest, path)).equals(body), path).toBe(true);
    const perKey = await s3Served(bucket);
    expect(perKey[`resume/${WEIGHTS}`]).toBe(weights.length - half);
    expect(perKey['resume/config.json']).toBeUndefined();
    expect(await served('resume')).toBe(size - half - files.get('config.json')!.length);
  });

  it('does not trust what an earlier attempt left: a damaged part is fetched again', async () => {
    await seed('damaged');
    const dest = join(work, 'damaged/cccccccc');
    const weights = files.get(WEIGHTS)!;
    const half = Math.floor(weights.length / 2);
    mkdirSync(`${dest}.partial`, { recursive: true });
    const wrong = Buffer.from(weights.subarray(0, half));
    wrong[10] = wrong[10]! ^ 0xff;
    writeFileSync(join(`${dest}.partial`, WEIGHTS), wrong);
    const result = await pull(dest, { FERRY_S3_BUCKET: bucket, FERRY_S3_PREFIX: 'damaged' });
    expect(result.error, result.output).toBeUndefined();
    expect(result.done).toMatchObject({ verified: files.size });
    expect(readFileSync(join(dest, WEIGHTS)).equals(weights)).toBe(true);
    // The rest once, then the whole file again once the check failed.
    expect((await s3Served(bucket))[`damaged/${WEIGHTS}`]).toBe(weights.length - half + weights.length);
  });

  it('verifies an object uploaded in parts by its multipart ETag', async () => {
    const body = randomBytes(11 * 1024 * 1024 + 5);
    const etag = await client.putObjectInParts(bucket, 'parts/big.bin', body, 5 * 1024 * 1024);
    expect(etag).toMatch(/^[0-9a-f]{32}-3$/);
    const dest = join(work, 'parts/dddddddd');
    mkdirSync(join(work, 'parts'));
    const result = await pull(dest, { FERRY_S3_BUCKET: bucket, FERRY_S3_PREFIX: 'parts' });
    expect(result.error, result.output).toBeUndefined();
    expect(result.done).toMatchObject({ verified: 1, unverified: 0, bytes: body.length });
  });

  it('fails with WeightsCorrupt, naming the file, when the store serves other bytes than it states', async () => {
    await seed('corrupt');
    // Damage the object where the store keeps it: the same size, other bytes, the ETag of the original.
    const stored = join(S3_DATA, bucket, 'corrupt', WEIGHTS);
    const bytes = readFileSync(stored);
    bytes[100] = bytes[100]! ^ 0xff;
    writeFileSync(stored, bytes);
    const dest = join(work, 'corrupt/eeeeeeee');
    mkdirSync(join(work, 'corrupt'));
    const result = await pull(dest, { FERRY_S3_BUCKET: bucket, FERRY_S3_PREFIX: 'corrupt' });
    expect(result.code).toBe(1);
    expect(result.error?.reason).toBe('WeightsCorrupt');
    expect(result.error?.message).toContain(`${WEIGHTS} is not the object corrupt/${WEIGHTS}`);
    // Nothing an engine could start on, and not the bad file for a next attempt to continue.
    expect(existsSync(dest)).toBe(false);
    expect(existsSync(join(`${dest}.partial`, WEIGHTS))).toBe(false);
  });

  it('names what is wrong with the source', async () => {
    const dest = join(work, 'errors/ffffffff');
    mkdirSync(join(work, 'errors'));
    const noBucket = await pull(dest, { FERRY_S3_BUCKET: `${bucket}-none`, FERRY_S3_PREFIX: 'whole' });
    expect(noBucket.error?.reason).toBe('SourceNotFound');
    expect(noBucket.error?.message).toContain('NoSuchBucket');
    const empty = await pull(dest, { FERRY_S3_BUCKET: bucket, FERRY_S3_PREFIX: 'nothing-here' });
    expect(empty.error).toMatchObject({ reason: 'SourceNotFound' });
    expect(empty.error?.message).toContain(`no objects under s3://${bucket}/nothing-here/`);
    const wrongKey = await pull(dest, {
      FERRY_S3_BUCKET: bucket,
      FERRY_S3_PREFIX: 'whole',
      AWS_SECRET_ACCESS_KEY: 'not-the-key',
    });
    expect(wrongKey.error?.reason).toBe('SourceForbidden');
    expect(wrongKey.output).not.toContain(s3Keys().secretAccessKey);
    const nowhere = await pull(dest, { FERRY_S3_BUCKET: bucket, FERRY_S3_ENDPOINT: 'http://127.0.0.1:9' });
    expect(nowhere.error?.reason).toBe('SourceUnreachable');
    for (const r of [noBucket, empty, wrongKey, nowhere]) expect(r.code).toBe(1);
  });
});
