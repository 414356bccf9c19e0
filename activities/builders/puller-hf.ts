// The Hub part of the puller's program (puller-script.ts puts it in, after the S3 part, whose HttpError, write_body
// and retried it uses). huggingface_hub lists the repository (pinned to the commit the revision names, so every file
// is of one commit) and answers a HEAD of each file; the bytes are fetched here, because huggingface_hub (2.x, as the
// vLLM image ships it) writes each download to a file of a name unique to the process and deletes it on failure: a
// deleted pod's next attempt would start every file from zero, and a killed one would leave its partial file behind.
//
// Resumed: each file grows at its own path in DEST.partial, and a later attempt continues it with a Range request.
// The token (HF_TOKEN) goes to the Hub only, never to where the Hub redirects a download (its CDN, a presigned URL).
// Within an attempt, a lost connection, a 5xx or a 429 (the Hub's rate limit) is tried again from where it stopped, as
// for S3.
//
// Verified: the Hub's ETag of a file is the SHA-256 of an LFS file's content and the git blob id (SHA-1 of
// "blob <size>\0" and the content) of any other; a file whose ETag is neither counts as unverified. A file that does
// not match is deleted: one an earlier attempt had begun is downloaded again, whole (a damaged partial file is not
// trusted); one downloaded whole just now fails the pull with WeightsCorrupt, naming it.
export const HF_PULLER = `


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


def hf_files(repo, revision, wanted):
    """For each wanted path: its size and ETag (the Hub's answer to a HEAD of the file) and its URL on the Hub, which
    is asked again for each download: the Hub redirects it to a signed URL of its CDN that expires, so one signed when
    the listing began could be stale by the time a large repository's last file is fetched."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    files = []
    for rel in wanted:
        url = hf_hub_url(repo, rel, revision=revision)
        meta = get_hf_file_metadata(url)
        files.append({'rel': rel, 'size': meta.size, 'etag': meta.etag, 'url': url})
    return files


def hf_fetch(item, path):
    """Puts the file at path, continuing what is there."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    have = os.path.getsize(path) if os.path.exists(path) else 0
    if item['size'] is not None and have > item['size']:
        os.remove(path)
        have = 0
    if item['size'] is not None and have == item['size']:
        open(path, 'ab').close()
        return
    request = urllib.request.Request(item['url'], headers={'user-agent': 'ferry-puller'})
    if have:
        request.add_header('Range', 'bytes=' + str(have) + '-')
    token = os.environ.get('HF_TOKEN', '')
    if token:
        # Not carried to a redirect's target (the Range is): the Hub's CDN gets a signed URL, not the token.
        request.add_unredirected_header('Authorization', 'Bearer ' + token)
    try:
        response = urllib.request.urlopen(request, timeout=60)
    except urllib.error.HTTPError as error:
        if error.code == 416 and have:
            os.remove(path)  # longer than the Hub's file: fetched again from the start, in the next try
            raise ConnectionError(item['rel'] + ': the Hub refused the range of a partial file')
        raise HttpError(error.code, 'HTTPError', item['rel'] + ': ' + str(error.reason))
    with response:
        # A server that ignores Range sends the whole file (200): written from the start.
        write_body(response, path, have and response.status == 206)
    if item['size'] is not None and os.path.getsize(path) != item['size']:
        raise ConnectionError('the body of ' + item['rel'] + ' ended early')


def hf_fetch_all(repo, revision, files, partial):
    """Every file into partial (what is there continued), each checked against the Hub; returns the unverified."""
    unverified = []
    for item in files:
        path = os.path.join(partial, *item['rel'].split('/'))
        for tries in range(2):
            kept = os.path.exists(path)
            retried(lambda: hf_fetch(item, path))
            problem = hf_check(path, item['etag'])
            if problem == 'unverified':
                unverified.append(item['rel'])
            if problem in (None, 'unverified'):
                break
            os.remove(path)
            if not kept or tries:
                fail('WeightsCorrupt', item['rel'] + ' is not the file of ' + repo + '@' + revision + ': ' + problem)
            emit('FERRY_REFETCH', {'files': [item['rel']], 'why': problem})
    return unverified


def hf_classify(error):
    detail = ' (' + str(error)[:300] + ')'
    if isinstance(error, HttpError):
        if error.status == 404:
            return 'SourceNotFound', 'the Hub has no such file' + detail
        if error.status in (401, 403):
            return 'AccessDenied', 'the Hub refused the download: check the token in source.huggingface.tokenSecret' + detail
        return 'DownloadFailed', 'the Hub failed the download' + detail
    if isinstance(error, (urllib.error.URLError, socket.timeout, ConnectionError)):
        return 'SourceUnreachable', 'the Hub did not answer (check HF_ENDPOINT in puller.env, and the network)' + detail
    return None
`;
