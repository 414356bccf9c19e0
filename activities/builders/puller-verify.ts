// The Hub part of the puller's check (puller-script.ts puts it in): every file it downloaded, read back against what
// the Hub states for it, before the weights count as complete. The Hub's ETag of a file (a HEAD of its resolve URL,
// huggingface_hub's get_hf_file_metadata) is the SHA-256 of an LFS file's content and the git blob id (SHA-1 of
// "blob <size>\0" and the content) of any other; a file whose ETag is neither counts as unverified. A mismatch deletes
// the file and fails with WeightsCorrupt naming it.
export const VERIFY_PULLER = `
import hashlib


def hf_check(path, etag):
    """None when the file is what the ETag states, 'unverified' when the ETag is no digest, else what differs."""
    etag = (etag or '').strip('"').lower()
    if etag.startswith('w/'):
        etag = etag[2:].strip('"')
    if len(etag) == 64 and all(c in '0123456789abcdef' for c in etag):
        digest, how = hashlib.sha256(), 'sha256'
    elif len(etag) == 40 and all(c in '0123456789abcdef' for c in etag):
        digest, how = hashlib.sha1(b'blob ' + str(os.path.getsize(path)).encode() + b'\\0'), 'git blob id'
    else:
        return 'unverified'
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1 << 20), b''):
            digest.update(chunk)
    got = digest.hexdigest()
    return None if got == etag else how + ' ' + got + ', the Hub states ' + etag


def hf_verify(repo, revision, root):
    """Checks every file under root against the Hub; returns the files nothing could verify."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    unverified = []
    for directory, _dirs, names in os.walk(root):
        for name in sorted(names):
            path = os.path.join(directory, name)
            rel = os.path.relpath(path, root).replace(os.sep, '/')
            problem = hf_check(path, get_hf_file_metadata(hf_hub_url(repo, rel, revision=revision)).etag)
            if problem == 'unverified':
                unverified.append(rel)
            elif problem:
                os.remove(path)
                fail('WeightsCorrupt', rel + ' is not the file of ' + repo + '@' + revision + ': ' + problem)
    return unverified
`;
