// The S3 part of the puller's program (puller-script.ts puts it in): the objects under a prefix of a bucket, with the
// standard library only (Signature Version 4 by hand; no boto3 in the vLLM image to rely on).
//
//   FERRY_S3_ENDPOINT   the store's URL (https://s3.<region>.amazonaws.com for AWS)
//   FERRY_S3_REGION     the region requests are signed for
//   FERRY_S3_BUCKET, FERRY_S3_PREFIX
//   FERRY_S3_ADDRESSING path (<endpoint>/<bucket>/<key>) or virtual (<bucket>.<host>/<key>)
//   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN   from the Secret; none: unsigned requests
//
// Resumed: the files stay in DEST.partial between attempts (a deleted pod, a retried Job). A file already there is
// continued with a Range request that names the object's ETag (If-Match), so an object replaced in between starts
// over rather than mixing two versions; a file of the full size is kept only once it verifies. Within an attempt, a
// connection lost, a 5xx or a 429 (slow down) is tried again from where it stopped, 5 times with growing pauses (1 to
// 16 s; tests scale them with FERRY_RETRY_PAUSE).
//
// Verified: each file is read back and checked against what the store states for the object: its full-object SHA-256
// or CRC32 checksum when it has one, else its ETag, which is the MD5 of the content for an object uploaded in one
// piece and the MD5 of the parts' MD5s, dash, the number of parts for a multipart upload (the part size from a HEAD of
// part 1, else the sizes uploaders use that make that many parts). KMS-encrypted objects have neither: they are counted
// as unverified. A mismatch deletes the file and fails with WeightsCorrupt naming it. Each GET names the ETag listed
// (If-Match): an object replaced meanwhile fails the attempt, and the next one lists again.
export const S3_PULLER = `
import base64, hashlib, hmac, socket, urllib.error, urllib.parse, urllib.request, zlib
import xml.etree.ElementTree as ElementTree


class HttpError(Exception):
    def __init__(self, status, code, message):
        Exception.__init__(self, str(status) + ' ' + code + ': ' + message)
        self.status, self.code = status, code


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class S3:
    def __init__(self):
        self.endpoint = os.environ['FERRY_S3_ENDPOINT'].rstrip('/')
        self.region = os.environ.get('FERRY_S3_REGION') or 'us-east-1'
        self.bucket = os.environ['FERRY_S3_BUCKET']
        prefix = os.environ.get('FERRY_S3_PREFIX', '').strip('/')
        self.prefix = prefix + '/' if prefix else ''
        parts = urllib.parse.urlsplit(self.endpoint)
        self.virtual = os.environ.get('FERRY_S3_ADDRESSING') == 'virtual'
        self.scheme = parts.scheme
        self.host = (self.bucket + '.' + parts.netloc) if self.virtual else parts.netloc
        self.root = '' if self.virtual else '/' + self.bucket
        self.access = os.environ.get('AWS_ACCESS_KEY_ID', '')
        self.secret = os.environ.get('AWS_SECRET_ACCESS_KEY', '')
        self.session = os.environ.get('AWS_SESSION_TOKEN', '')
        self.opener = urllib.request.build_opener(_NoRedirect)
        self.where = 's3://' + self.bucket + '/' + self.prefix + ' at ' + self.endpoint

    def _headers(self, method, path, query, extra):
        amz_date = time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())
        payload = hashlib.sha256(b'').hexdigest()
        headers = {'host': self.host, 'x-amz-content-sha256': payload, 'x-amz-date': amz_date}
        if self.session:
            headers['x-amz-security-token'] = self.session
        if not (self.access and self.secret):
            headers.update(extra)
            return headers
        # Every x-amz-* header is signed, as S3 requires; Range and If-Match need not be.
        headers.update({k: v for k, v in extra.items() if k.startswith('x-amz-')})
        names = sorted(headers)
        signed = ';'.join(names)
        canonical = '\\n'.join([method, path, query, ''.join(n + ':' + headers[n] + '\\n' for n in names), signed, payload])
        scope = amz_date[:8] + '/' + self.region + '/s3/aws4_request'
        to_sign = '\\n'.join(['AWS4-HMAC-SHA256', amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        key = ('AWS4' + self.secret).encode()
        for part in (amz_date[:8], self.region, 's3', 'aws4_request'):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers['authorization'] = 'AWS4-HMAC-SHA256 Credential=' + self.access + '/' + scope + ', SignedHeaders=' + signed + ', Signature=' + signature
        headers.update(extra)
        return headers

    def request(self, method, key=None, query=None, extra=None):
        path = self.root + ('/' + urllib.parse.quote(key, safe='/~') if key is not None else ('/' if self.virtual else ''))
        qs = '&'.join(urllib.parse.quote(k, safe='~') + '=' + urllib.parse.quote(v, safe='~') for k, v in sorted((query or {}).items()))
        headers = self._headers(method, path, qs, extra or {})
        url = self.scheme + '://' + self.host + path + ('?' + qs if qs else '')
        try:
            return self.opener.open(urllib.request.Request(url, method=method, headers=headers), timeout=60)
        except urllib.error.HTTPError as error:
            code, message = 'HTTP' + str(error.code), error.reason or ''
            try:
                body = ElementTree.fromstring(error.read() or b'<x/>')
                code = body.findtext('Code') or code
                message = body.findtext('Message') or message
            except Exception:
                pass
            if 300 <= error.code < 400:
                message = (message + '; ' if message else '') + 'the store redirects to ' + str(error.headers.get('Location') or error.headers.get('x-amz-bucket-region') or 'another endpoint') + ': check source.s3.endpoint and source.s3.region'
            raise HttpError(error.code, code, message)

    def list(self):
        objects, token = [], None
        ns = '{http://s3.amazonaws.com/doc/2006-03-01/}'
        while True:
            query = {'list-type': '2', 'prefix': self.prefix}
            if token:
                query['continuation-token'] = token
            with retried(lambda: self.request('GET', None, query)) as response:
                body = ElementTree.fromstring(response.read())
            for item in body.iter(ns + 'Contents'):
                key = item.findtext(ns + 'Key')
                rel = key[len(self.prefix):]
                if not rel or rel.endswith('/'):
                    continue
                if any(part in ('', '.', '..') for part in rel.split('/')):
                    fail('SourceNotFound', 'the object ' + key + ' has a key that is not a plain relative path under the prefix')
                objects.append({'key': key, 'rel': rel, 'size': int(item.findtext(ns + 'Size') or 0), 'etag': (item.findtext(ns + 'ETag') or '').strip('"')})
            token = body.findtext(ns + 'NextContinuationToken')
            if body.findtext(ns + 'IsTruncated') != 'true' or not token:
                return objects

    def fetch(self, item, path):
        """Puts the object at path, continuing what is there; returns the headers the store sent with it."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        while True:
            have = os.path.getsize(path) if os.path.exists(path) else 0
            if have > item['size']:
                os.remove(path)
                have = 0
            # If-Match: the object as listed, not one put in its place since.
            extra = {'x-amz-checksum-mode': 'ENABLED', 'if-match': '"' + item['etag'] + '"'}
            if have == item['size']:
                # All there already (an earlier attempt's, or an empty object): only what the store states of it.
                if not have:
                    open(path, 'wb').close()
                with self.request('HEAD', item['key'], None, extra) as response:
                    return {k.lower(): v for k, v in response.headers.items()}
            if have:
                extra['range'] = 'bytes=' + str(have) + '-'
            try:
                response = self.request('GET', item['key'], None, extra)
            except HttpError as error:
                if error.status == 412:
                    # Replaced since the listing: this attempt cannot know the new object; the next lists again.
                    os.remove(path)
                    raise ObjectChanged(item['key'] + ' changed while it was downloading (' + str(error) + ')')
                raise
            with response:
                headers = {k.lower(): v for k, v in response.headers.items()}
                # A store that ignores Range sends the whole object (200): written from the start.
                write_body(response, path, have and response.status == 206)
            if os.path.getsize(path) == item['size']:
                return headers
            raise ConnectionError('the body of ' + item['key'] + ' ended early')

    def part_sizes(self, item):
        """The part sizes that could have made the object's multipart ETag: the store's own (a HEAD of part 1), else the
        usual choices of uploaders, each only if it makes that many parts."""
        parts = int(item['etag'].rsplit('-', 1)[1])
        mib = 1 << 20
        candidates = []
        try:
            with self.request('HEAD', item['key'], {'partNumber': '1'}) as response:
                candidates.append(int(response.headers.get('Content-Length')))
        except Exception:
            pass
        each = -(-item['size'] // parts)
        candidates += [-(-each // mib) * mib] + [n * mib for n in (8, 16, 5, 10, 32, 64, 100, 128, 256, 512)]
        fit = []
        for size in candidates:
            if size > 0 and -(-item['size'] // size) == parts and size not in fit:
                fit.append(size)
        return fit


def write_body(response, path, append):
    """The response's body into path, after what is there when append. read1: what has arrived, so the file grows as
    the bytes come (progress, and what a restart finds), rather than a whole MiB at a time."""
    with open(path, 'ab' if append else 'wb') as out:
        while True:
            chunk = response.read1(1 << 20)
            if not chunk:
                break
            out.write(chunk)


def retried(call):
    """call(), again after a lost connection, a 5xx or a request to slow down (429, 408), 5 times with growing pauses;
    other failures at once."""
    for attempt in range(6):
        try:
            return call()
        except HttpError as error:
            if (error.status < 500 and error.status not in (408, 429)) or attempt == 5:
                raise
        except (urllib.error.URLError, socket.timeout, ConnectionError, http_client_error()):
            if attempt == 5:
                raise
        time.sleep(min(2 ** attempt, 16) * float(os.environ.get('FERRY_RETRY_PAUSE', '1')))


class ObjectChanged(Exception):
    pass


def http_client_error():
    import http.client
    return http.client.HTTPException


def s3_digest(path, how, part):
    """The file's digest in the form the store states it: sha256 or crc32 (base64), md5 (hex), or with a part size the
    multipart form <md5 of the parts' md5s>-<parts>."""
    whole = hashlib.sha256() if how == 'sha256' else hashlib.md5()
    crc, parts, current, in_part = 0, [], hashlib.md5(), 0
    with open(path, 'rb') as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            if how == 'crc32':
                crc = zlib.crc32(chunk, crc)
            elif part:
                while chunk:
                    take = chunk[:part - in_part]
                    current.update(take)
                    in_part += len(take)
                    chunk = chunk[len(take):]
                    if in_part == part:
                        parts.append(current.digest())
                        current, in_part = hashlib.md5(), 0
            else:
                whole.update(chunk)
    if how == 'sha256':
        return base64.b64encode(whole.digest()).decode()
    if how == 'crc32':
        return base64.b64encode(crc.to_bytes(4, 'big')).decode()
    if part:
        if in_part:
            parts.append(current.digest())
        return hashlib.md5(b''.join(parts)).hexdigest() + '-' + str(len(parts))
    return whole.hexdigest()


def s3_check(s3, item, path, headers):
    """None when the file is the object, 'unverified' when the store states nothing to check, else what differs."""
    sha256 = headers.get('x-amz-checksum-sha256', '')
    crc32 = headers.get('x-amz-checksum-crc32', '')
    etag = item['etag']
    kms = headers.get('x-amz-server-side-encryption', '') in ('aws:kms', 'aws:kms:dsse')
    if sha256 and '-' not in sha256:
        want, how = sha256, 'sha256'
    elif crc32 and '-' not in crc32:
        want, how = crc32, 'crc32'
    elif etag and not kms and all(c in '0123456789abcdef-' for c in etag):
        want, how = etag, 'etag'
    else:
        return 'unverified'
    # An ETag of a multipart upload depends on the part size, which the store may not say: every size that fits.
    sizes = s3.part_sizes(item) if how == 'etag' and '-' in etag else [0]
    if not sizes:
        return 'unverified'
    got = None
    for part in sizes:
        got = s3_digest(path, how, part)
        if got == want:
            return None
    return how + ' ' + got + ', the store states ' + want


def s3_fetch_all(s3, objects, partial):
    """Every object into partial (what is there continued and checked); returns the files nothing could verify."""
    unverified = []
    wanted = set()
    for item in objects:
        path = os.path.join(partial, *item['rel'].split('/'))
        wanted.add(path)
        kept = os.path.exists(path)
        headers = retried(lambda: s3.fetch(item, path))
        problem = s3_check(s3, item, path, headers)
        if problem and problem != 'unverified' and kept:
            # What an earlier attempt left is not trusted: fetched again whole.
            os.remove(path)
            headers = retried(lambda: s3.fetch(item, path))
            problem = s3_check(s3, item, path, headers)
        if problem == 'unverified':
            unverified.append(item['rel'])
        elif problem:
            os.remove(path)
            fail('WeightsCorrupt', item['rel'] + ' is not the object ' + item['key'] + ' of ' + s3.where + ': ' + problem)
    # Files of objects no longer listed (removed from the bucket since an earlier attempt) do not belong to the weights.
    for root, _dirs, files in os.walk(partial):
        for name in files:
            if os.path.join(root, name) not in wanted:
                os.remove(os.path.join(root, name))
    return unverified


def s3_classify(error, where):
    detail = ' (' + str(error)[:300] + ')'
    if isinstance(error, HttpError):
        if error.status == 404:
            return 'SourceNotFound', 'no such bucket or object: ' + where + detail
        if error.status in (401, 403):
            return 'SourceForbidden', 'the store refused the request: check the keys in source.s3.credentialsSecret and what they may read in ' + where + detail
        if 300 <= error.status < 400:
            return 'SourceUnreachable', 'the store sent the request elsewhere: ' + where + detail
        return 'DownloadFailed', 'the store failed the request: ' + where + detail
    if isinstance(error, ObjectChanged):
        return 'DownloadFailed', str(error) + '; the next attempt lists the objects again'
    if isinstance(error, (urllib.error.URLError, socket.timeout, ConnectionError)):
        return 'SourceUnreachable', 'the store did not answer: ' + where + ' (check source.s3.endpoint)' + detail
    return None
`;
