// The program the puller Job runs (`python3 -c PULLER_SCRIPT`), and the parser for the lines it prints.
//
// Contract (environment in, lines out):
//   FERRY_SOURCE_KIND  huggingface | pvc | s3
//   FERRY_HF_REPO, FERRY_HF_REVISION   for huggingface (HF_TOKEN from a Secret when the repo needs one)
//   FERRY_SOURCE_PATH  for pvc: the directory to copy, under the read-only source mount
//   FERRY_S3_*         for s3: where the objects are (puller-s3.ts), AWS_* from a Secret
//   FERRY_OCI_*        for oci: the artifact (puller-oci.ts), FERRY_OCI_AUTH (a docker config) from a Secret
//   FERRY_SOURCE       human-readable source, written into the completion marker
//   FERRY_DEST         /models/<hash8>; the weights land in DEST.partial and are renamed to DEST when complete,
//                      with DEST/.ferry-complete inside. A DEST that is already complete exits 0 at once.
//   FERRY_PROGRESS {"bytes": N, "totalBytes": M|null, "bytesPerSecond": R}   about every 10 s while copying (R: over
//                      the last interval; absent on the first line), and once at the end
//   FERRY_ERROR {"reason": R, "message": M}             before a non-zero exit
//   FERRY_DONE {"dest": D, "bytes": N, "skipped": B}    on success; for huggingface, s3 and oci also "verified" and
//                      "unverified": the files checked against what the source states (puller-hf.ts, -s3, -oci)
//   FERRY_PRUNED {"removed": [names]}                   after success: the other sources' weights it deleted
//   FERRY_REFETCH {"files": [paths], "why": W}          huggingface: a continued file that failed the check, downloaded
//                      again whole
//
// Weights of earlier sources (siblings of DEST named by an 8-hex-digit source hash) are kept while the new source
// downloads, so a failed download leaves the volume as it was, and deleted once DEST is complete: the engine is scaled
// to 0 before a new source is pulled, so nothing reads them any more. FERRY_PRUNE=0 keeps them.
//
// Only the standard library is needed for a pvc, s3 or oci source; a huggingface source needs huggingface_hub, which the vLLM
// image ships. When the repository has safetensors, other weight formats (and Meta's `original/` checkpoints) are
// skipped, as vLLM itself would skip them: they can double the download.

import { OCI_PULLER } from './puller-oci.js';
import { S3_PULLER } from './puller-s3.js';
import { HF_PULLER } from './puller-hf.js';

export const PULLER_SCRIPT = `
import errno, fnmatch, json, os, shutil, sys, threading, time

kind = os.environ.get('FERRY_SOURCE_KIND', '')
dest = os.environ['FERRY_DEST'].rstrip('/')
partial = dest + '.partial'
marker_name = '.ferry-complete'
interval = float(os.environ.get('FERRY_PROGRESS_INTERVAL', '10'))


def emit(tag, payload):
    print(tag + ' ' + json.dumps(payload), flush=True)


# The progress thread, once started: stopped before the program ends, so that it is not writing to stdout while the
# interpreter shuts down (which aborts the process instead of exiting with the code).
stop = threading.Event()
reporter = None


def fail(reason, message):
    stop.set()
    if reporter:
        reporter.join(5)
    emit('FERRY_ERROR', {'reason': reason, 'message': message[:1000]})
    sys.exit(1)


def tree_size(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def classify(error):
    if kind in ('s3', 'oci', 'huggingface'):
        found = s3_classify(error, s3.where) if kind == 's3' else oci_classify(error, oci.where) if kind == 'oci' else hf_classify(error)
        if found:
            return found
    names = [cls.__name__ for cls in type(error).__mro__]
    detail = ' (' + type(error).__name__ + ': ' + str(error)[:300] + ')'
    if 'GatedRepoError' in names:
        return 'AccessDenied', 'the repository is gated: accept its terms on huggingface.co and put a token of that account in source.huggingface.tokenSecret' + detail
    if 'RepositoryNotFoundError' in names:
        return 'SourceNotFound', 'the repository does not exist, or it is private and source.huggingface.tokenSecret holds no valid token' + detail
    if 'RevisionNotFoundError' in names:
        return 'SourceNotFound', 'the revision does not exist in the repository' + detail
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return 'NoSpace', 'the volume is full: raise spec.storage.size' + detail
    if isinstance(error, PermissionError):
        return 'AccessDenied', 'permission denied (the puller runs as uid 2000, gid 0)' + detail
    status = getattr(getattr(error, 'response', None), 'status_code', None)
    if status in (401, 403):
        return 'AccessDenied', 'the hub refused the token in source.huggingface.tokenSecret' + detail
    return 'DownloadFailed', 'the download failed' + detail


def prune():
    if os.environ.get('FERRY_PRUNE', '1') == '0':
        return
    parent, own = os.path.split(dest)
    removed = []
    for name in sorted(os.listdir(parent)):
        base = name.rsplit('.', 1)[0] if name.endswith(('.partial', '.layers')) else name
        if base != own and len(base) == 8 and all(c in '0123456789abcdef' for c in base):
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
            removed.append(name)
    if removed:
        emit('FERRY_PRUNED', {'removed': removed})


${S3_PULLER}
${OCI_PULLER}
${HF_PULLER}

checked = None
measured = partial  # what progress counts

if os.path.isfile(os.path.join(dest, marker_name)):
    prune()
    emit('FERRY_DONE', {'dest': dest, 'bytes': tree_size(dest), 'skipped': True})
    sys.exit(0)

if kind == 'huggingface':
    repo = os.environ['FERRY_HF_REPO']
    revision = os.environ.get('FERRY_HF_REVISION') or 'main'
    try:
        from huggingface_hub import HfApi
    except ImportError:
        fail('PullerImageInvalid', 'huggingface_hub is not installed in the puller image: leave puller.image empty to use the vLLM image')
    try:
        info = HfApi().model_info(repo, revision=revision)
        names = [f.rfilename for f in (info.siblings or [])]
        if any(name.endswith('.safetensors') for name in names):
            names = [n for n in names if not any(fnmatch.fnmatch(n, p) for p in ('*.bin', '*.pt', '*.pth', 'original/*'))]
        # Every file of the commit the revision names now, even if the revision moves on meanwhile.
        hub_files = hf_files(repo, info.sha or revision, names)
    except Exception as error:
        fail(*classify(error))
    sizes = [f['size'] for f in hub_files]
    total = sum(sizes) if all(size is not None for size in sizes) else None

    def fetch():
        global checked
        # What huggingface_hub itself may have left on the volume (earlier pullers used its downloads).
        shutil.rmtree(os.path.join(partial, '.cache'), ignore_errors=True)
        unverified = hf_fetch_all(repo, revision, hub_files, partial)
        checked = {'verified': len(hub_files) - len(unverified), 'unverified': len(unverified)}
elif kind == 'pvc':
    source = os.environ['FERRY_SOURCE_PATH']
    if not os.path.isdir(source):
        fail('SourceNotFound', source + ' is not a directory on the source volume: check source.pvc.claimName and source.pvc.path')
    total = tree_size(source)

    def fetch():
        # What an earlier attempt copied whole stays: a file of the source's size and modification time (copy2 keeps
        # it) is not copied again, as rsync's quick check; any other is copied whole. Files the source no longer has go.
        wanted = set()
        for root, _dirs, names in os.walk(source, followlinks=True):
            for name in names:
                src = os.path.join(root, name)
                dst = os.path.join(partial, os.path.relpath(src, source))
                wanted.add(dst)
                have = os.stat(dst) if os.path.exists(dst) else None
                want = os.stat(src)
                if have and have.st_size == want.st_size and int(have.st_mtime) == int(want.st_mtime):
                    continue
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(src, dst)
        for root, _dirs, names in os.walk(partial):
            for name in names:
                if os.path.join(root, name) not in wanted:
                    os.remove(os.path.join(root, name))
elif kind == 's3':
    s3 = S3()
    try:
        objects = s3.list()
    except Exception as error:
        fail(*classify(error))
    if not objects:
        fail('SourceNotFound', 'no objects under ' + s3.where + ': check source.s3.bucket and source.s3.prefix')
    if any(o['rel'].endswith('.safetensors') for o in objects):
        objects = [o for o in objects if not any(fnmatch.fnmatch(o['rel'], p) for p in ('*.bin', '*.pt', '*.pth', 'original/*'))]
    total = sum(o['size'] for o in objects)

    def fetch():
        global checked
        unverified = s3_fetch_all(s3, objects, partial)
        checked = {'verified': len(objects) - len(unverified), 'unverified': len(unverified)}
elif kind == 'oci':
    oci = Oci()
    try:
        layers = oci.layers()
    except Exception as error:
        fail(*classify(error))
    if not layers:
        fail('SourceNotFound', oci.where + ' has no layers: an artifact of the weights has one per file (oras push)')
    total = sum(layer['size'] for layer in layers)
    if layers[0].get('image'):
        measured = dest + '.layers'  # the blobs, which the total counts; unpacked, the files are larger

    def fetch():
        global checked
        checked = {'verified': oci_fetch_all(oci, layers, partial), 'unverified': 0}
else:
    fail('InvalidSource', 'unknown FERRY_SOURCE_KIND ' + repr(kind))

def report():
    then, before = time.monotonic(), tree_size(measured)
    while not stop.wait(interval):
        now, written = time.monotonic(), tree_size(measured)
        rate = max(0, written - before) / max(now - then, 0.001)
        emit('FERRY_PROGRESS', {'bytes': written, 'totalBytes': total, 'bytesPerSecond': int(rate)})
        then, before = now, written


emit('FERRY_PROGRESS', {'bytes': tree_size(measured), 'totalBytes': total})
reporter = threading.Thread(target=report, daemon=True)
reporter.start()
try:
    fetch()
except Exception as error:
    fail(*classify(error))
stop.set()
reporter.join(5)

size = tree_size(partial)
with open(os.path.join(partial, marker_name), 'w') as marker:
    json.dump({'source': os.environ.get('FERRY_SOURCE', ''), 'bytes': size, 'completedAt': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, marker)
if os.path.lexists(dest):
    shutil.rmtree(dest)
os.rename(partial, dest)
emit('FERRY_PROGRESS', {'bytes': size, 'totalBytes': size})
prune()
emit('FERRY_DONE', dict({'dest': dest, 'bytes': size, 'skipped': False}, **(checked or {})))
`.trimStart();

/** A line the puller prints, parsed. Other log lines (library output) give undefined. */
export type PullerEvent =
  | { type: 'progress'; bytes: number; totalBytes: number | null; bytesPerSecond?: number }
  | { type: 'error'; reason: string; message: string }
  | { type: 'done'; dest: string; bytes: number; skipped: boolean };

/** A field the puller printed, as text; `fallback` when it is missing or not a scalar. */
function text(value: unknown, fallback: string): string {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
    ? String(value)
    : fallback;
}

export function parsePullerLine(line: string): PullerEvent | undefined {
  const match = /^FERRY_(PROGRESS|ERROR|DONE) (\{.*\})\s*$/.exec(line);
  if (!match) return undefined;
  let payload: Record<string, unknown>;
  try {
    payload = JSON.parse(match[2]!) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  switch (match[1]) {
    case 'PROGRESS':
      return typeof payload.bytes === 'number'
        ? {
            type: 'progress',
            bytes: payload.bytes,
            totalBytes: typeof payload.totalBytes === 'number' ? payload.totalBytes : null,
            ...(typeof payload.bytesPerSecond === 'number' ? { bytesPerSecond: payload.bytesPerSecond } : {}),
          }
        : undefined;
    case 'ERROR':
      return {
        type: 'error',
        reason: text(payload.reason, 'DownloadFailed'),
        message: text(payload.message, ''),
      };
    default:
      return {
        type: 'done',
        dest: text(payload.dest, ''),
        bytes: typeof payload.bytes === 'number' ? payload.bytes : 0,
        skipped: payload.skipped === true,
      };
  }
}

/** The latest progress, error and completion found in a (tail of a) puller log. */
export function summarizePullerLog(log: string): {
  progress?: Extract<PullerEvent, { type: 'progress' }>;
  error?: Extract<PullerEvent, { type: 'error' }>;
  done?: Extract<PullerEvent, { type: 'done' }>;
} {
  const summary: ReturnType<typeof summarizePullerLog> = {};
  for (const line of log.split('\n')) {
    const event = parsePullerLine(line);
    if (event?.type === 'progress') summary.progress = event;
    else if (event?.type === 'error') summary.error = event;
    else if (event?.type === 'done') summary.done = event;
  }
  return summary;
}
