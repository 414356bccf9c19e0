// The puller's Hugging Face source against the local Hub (olah, through the front that counts the bytes it serves),
// with the real huggingface_hub of the vLLM runtime listing the repository: a download killed halfway is continued by
// the next run from what the first left on the volume, and a damaged partial file is not trusted. The puller's program runs here as a
// process, as the Job's container would run it; a killed process stands for a deleted pod (its volume stays).
import { readFileSync, statSync, mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { vllmPython } from '../../deploy/schema/gen-vllm-flags.js';
import { waitFor } from '../support/kube.js';
import { HUB, hubBytes, realEngineMissing, repoBytes, repoFiles, runPuller, type PullerRun } from './support.js';

const missing = realEngineMissing();
const REPO = 'ferry-local/tiny-llama';
const WEIGHTS = 'model.safetensors';

/** The weights' file an interrupted run left, and its size. */
function partialWeights(dest: string): [string, number] | undefined {
  const path = join(`${dest}.partial`, WEIGHTS);
  return existsSync(path) ? [path, statSync(path).size] : undefined;
}

describe.skipIf(missing)(`the puller's Hub source, interrupted${missing ? ` (skipped: ${missing})` : ''}`, () => {
  const work = mkdtempSync(join(tmpdir(), 'ferry-hf-puller-'));
  afterAll(() => rmSync(work, { recursive: true, force: true }));
  const files = missing ? new Map<string, Buffer>() : repoFiles(REPO, 'v1');
  const size = missing ? 0 : repoBytes(REPO, 'v1');
  const weights = files.get(WEIGHTS)?.length ?? 0;

  /** Runs the puller for the tiny Llama into `dest` through `endpoint`; killed once `killWhen` holds, if given. */
  async function pull(dest: string, endpoint: string, killWhen?: () => boolean): Promise<PullerRun> {
    const kill = new AbortController();
    const run = runPuller(
      {
        FERRY_SOURCE_KIND: 'huggingface',
        FERRY_HF_REPO: REPO,
        FERRY_HF_REVISION: 'v1',
        FERRY_DEST: dest,
        HF_ENDPOINT: endpoint,
      },
      { python: vllmPython(), kill: kill.signal },
    );
    if (killWhen) {
      await waitFor('the weights partly downloaded', 60_000, async () => killWhen());
      kill.abort();
    }
    return run;
  }

  it('continues a download killed halfway: the Hub serves at most 1.1 × the model in all', async () => {
    const dest = join(work, 'resumed', 'aaaa1111');
    const before = await hubBytes(REPO);
    // Paced to about 60 kB/s, so the weights are a few seconds in the making; killed once half of them are there.
    const first = await pull(
      dest,
      `${HUB}/_ferry/throttle/60000`,
      () => (partialWeights(dest)?.[1] ?? 0) >= weights / 2,
    );
    expect(first.code).toBeNull();
    expect(first.done).toBeUndefined();
    const left = partialWeights(dest)!;
    expect(left[1]).toBeGreaterThanOrEqual(weights / 2);
    expect(left[1]).toBeLessThan(weights);

    const second = await pull(dest, HUB);
    expect(second.code, second.output).toBe(0);
    expect(second.done).toMatchObject({ skipped: false, verified: files.size, unverified: 0 });
    for (const [path, body] of files) expect(readFileSync(join(dest, path)).equals(body), path).toBe(true);
    const served = (await hubBytes(REPO)) - before;
    console.log(
      `hub source, killed halfway and continued: served ${served} bytes for ${size} (${(served / size).toFixed(4)} ×)`,
    );
    expect(served).toBeGreaterThanOrEqual(size);
    expect(served).toBeLessThanOrEqual(1.1 * size);
  });

  it('does not trust a damaged partial file: the file is downloaded again, whole, and the weights are right', async () => {
    const dest = join(work, 'damaged', 'bbbb2222');
    await pull(dest, `${HUB}/_ferry/throttle/60000`, () => (partialWeights(dest)?.[1] ?? 0) >= weights / 2);
    const [path, length] = partialWeights(dest)!;
    // A byte in the part already written is changed, as a broken disk would.
    const bytes = readFileSync(path);
    const at = Math.floor(length / 2);
    bytes[at] = bytes[at]! ^ 0xff;
    writeFileSync(path, bytes);
    const before = await hubBytes(REPO);

    const second = await pull(dest, HUB);
    expect(second.code, second.output).toBe(0);
    expect(second.output).toContain(`FERRY_REFETCH {"files": ["${WEIGHTS}"]`);
    expect(second.done).toMatchObject({ verified: files.size, unverified: 0 });
    expect(readFileSync(join(dest, WEIGHTS)).equals(files.get(WEIGHTS)!)).toBe(true);
    // The rest of the weights, then the whole file again.
    expect((await hubBytes(REPO)) - before).toBeGreaterThanOrEqual(weights + (weights - length));
  });
});
