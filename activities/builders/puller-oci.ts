// The OCI part of the puller's program (puller-script.ts puts it in): an artifact in a registry, by the OCI distribution
// API with the standard library only.
//
//   FERRY_OCI_REFERENCE   registry[:port]/repository[:tag][@sha256:digest]
//   FERRY_OCI_PLAIN_HTTP  1: http:// (a registry without TLS), else https://
//   FERRY_OCI_AUTH        the JSON of a docker config (a kubernetes.io/dockerconfigjson Secret's .dockerconfigjson)
//   FERRY_OCI_PATH        for an image: the directory of its filesystem that holds the weights (default /models)
//
// The manifest (an index: its amd64 manifest, else its first) lists the layers. An artifact: each layer named by the
// annotation org.opencontainers.image.title (as `oras push` writes it) is one file, at that path under the weights'
// directory. An image (layers without names: tar archives, plain or gzip, of its filesystem, as KServe's modelcars):
// each layer's blob is fetched into DEST.layers, checked by its digest and unpacked in order, keeping the files under
// FERRY_OCI_PATH and honouring the layers' whiteouts; a name that would leave that directory, a link, a device is
// skipped. zstd layers are refused (the standard library cannot read them). Authentication: Basic with the config's
// entry for the registry, or the Bearer token its WWW-Authenticate names, fetched with that entry.
//
// Resumed: a file (an image's layer blob) an earlier attempt left is continued with a Range request; one of the full size
// is kept only once it verifies; an image's layer already unpacked is not fetched again. Verified: every file's (every
// image layer's) SHA-256 is its layer's digest, and a manifest pinned by digest is checked too; a mismatch deletes the
// file and fails with WeightsCorrupt naming it.
export const OCI_PULLER = `
import re, tarfile


class Oci:
    MANIFESTS = ', '.join([
        'application/vnd.oci.image.index.v1+json', 'application/vnd.oci.image.manifest.v1+json',
        'application/vnd.docker.distribution.manifest.v2+json', 'application/vnd.docker.distribution.manifest.list.v2+json'])

    def __init__(self):
        self.reference = os.environ['FERRY_OCI_REFERENCE']
        rest, _, self.digest = self.reference.partition('@')
        self.registry, _, repository = rest.partition('/')
        name, colon, tag = repository.rpartition(':')
        self.repository, self.tag = (name, tag) if colon and '/' not in tag else (repository, 'latest')
        self.base = ('http' if os.environ.get('FERRY_OCI_PLAIN_HTTP') == '1' else 'https') + '://' + self.registry
        self.opener = urllib.request.build_opener(_NoRedirect)
        self.basic, self.bearer = None, None
        try:
            entry = (json.loads(os.environ.get('FERRY_OCI_AUTH') or '{}').get('auths') or {}).get(self.registry) or {}
        except (ValueError, AttributeError):
            fail('SourceForbidden', 'the Secret of source.oci.credentialsSecret holds no docker config JSON under .dockerconfigjson')
        if entry.get('auth'):
            self.basic = entry['auth']
        elif entry.get('username'):
            self.basic = base64.b64encode((entry['username'] + ':' + entry.get('password', '')).encode()).decode()
        self.where = 'oci://' + self.reference

    def request(self, method, path, headers=None, follow=3):
        headers = dict(headers or {})
        if self.bearer:
            headers['Authorization'] = 'Bearer ' + self.bearer
        elif self.basic:
            headers['Authorization'] = 'Basic ' + self.basic
        url = path if path.startswith('http') else self.base + path
        try:
            return self.opener.open(urllib.request.Request(url, method=method, headers=headers), timeout=60)
        except urllib.error.HTTPError as error:
            if error.code in (301, 302, 303, 307, 308) and follow and error.headers.get('Location'):
                # A blob served from elsewhere (a storage backend's URL): no credentials of the registry go along.
                location = urllib.parse.urljoin(url, error.headers['Location'])
                return self.opener.open(urllib.request.Request(location, method=method, headers={k: v for k, v in headers.items() if k != 'Authorization'}), timeout=60)
            challenge = error.headers.get('WWW-Authenticate', '') if error.code == 401 else ''
            if challenge.lower().startswith('bearer ') and not self.bearer and follow:
                self.bearer = self.token(challenge)
                return self.request(method, path, headers, follow - 1)
            code, message = 'HTTP' + str(error.code), error.reason or ''
            try:
                problem = (json.loads(error.read() or b'{}').get('errors') or [{}])[0]
                code, message = problem.get('code') or code, problem.get('message') or message
            except Exception:
                pass
            raise HttpError(error.code, code, message)

    def token(self, challenge):
        fields = dict((k, v) for k, v in re.findall(r'(\\w+)="([^"]*)"', challenge))
        query = urllib.parse.urlencode({k: fields[k] for k in ('service', 'scope') if k in fields})
        request = urllib.request.Request(fields.get('realm', '') + ('?' + query if query else ''))
        if self.basic:
            request.add_header('Authorization', 'Basic ' + self.basic)
        try:
            with self.opener.open(request, timeout=60) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as error:
            raise HttpError(error.code, 'TokenRefused', 'the token service ' + fields.get('realm', '') + ' refused: ' + str(error.reason))
        return body.get('token') or body.get('access_token')

    def layers(self):
        """The files of the artifact: [{'rel', 'size', 'digest'}], from its manifest."""
        path = '/v2/' + self.repository + '/manifests/' + (self.digest or self.tag)
        with retried(lambda: self.request('GET', path, {'Accept': self.MANIFESTS})) as response:
            body = response.read()
        if self.digest and 'sha256:' + hashlib.sha256(body).hexdigest() != self.digest:
            fail('WeightsCorrupt', 'the manifest of ' + self.where + ' is not the one its digest names')
        manifest = json.loads(body)
        if manifest.get('manifests'):
            chosen = manifest['manifests'][0]
            for m in manifest['manifests']:
                if (m.get('platform') or {}).get('architecture') == 'amd64':
                    chosen = m
                    break
            path = '/v2/' + self.repository + '/manifests/' + chosen['digest']
            with retried(lambda: self.request('GET', path, {'Accept': self.MANIFESTS})) as response:
                manifest = json.loads(response.read())
        files = []
        layers = manifest.get('layers') or []
        titled = [layer for layer in layers if (layer.get('annotations') or {}).get('org.opencontainers.image.title')]
        if layers and not titled:
            # An image: its filesystem's layers, unpacked in order.
            for layer in layers:
                kind = str(layer.get('mediaType'))
                if 'zstd' in kind:
                    fail('SourceNotFound', self.where + ' has a zstd layer (' + kind + '): only tar and gzip layers are read')
                files.append({'rel': layer.get('digest', '').partition(':')[2], 'size': int(layer.get('size') or 0), 'digest': layer.get('digest', ''), 'image': True})
            return files
        for layer in layers:
            title = (layer.get('annotations') or {}).get('org.opencontainers.image.title')
            if not title:
                fail('SourceNotFound', self.where + ' has a layer without a file name (' + str(layer.get('mediaType')) + ') among named ones: neither an artifact of files (oras push) nor an image')
            if title.startswith('/') or any(part in ('', '.', '..') for part in title.split('/')):
                fail('SourceNotFound', self.where + ' names a file ' + title + ' that is not a plain relative path')
            files.append({'rel': title, 'size': int(layer.get('size') or 0), 'digest': layer.get('digest', '')})
        return files

    def fetch(self, item, path):
        """Puts the layer's blob at path, continuing what is there."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        have = os.path.getsize(path) if os.path.exists(path) else 0
        if have > item['size']:
            os.remove(path)
            have = 0
        if have == item['size']:
            open(path, 'ab').close()
            return
        headers = {'Range': 'bytes=' + str(have) + '-'} if have else {}
        with self.request('GET', '/v2/' + self.repository + '/blobs/' + item['digest'], headers) as response:
            write_body(response, path, have and response.status == 206)
        if os.path.getsize(path) != item['size']:
            raise ConnectionError('the blob of ' + item['rel'] + ' ended early')


def oci_fetch_all(oci, files, partial):
    """Every layer (what is there continued), each checked by its digest: an artifact's into partial, an image's into
    DEST.layers and then unpacked into partial. Returns the number of files the weights have."""
    image = bool(files and files[0].get('image'))
    where = dest + '.layers' if image else partial
    for item in files:
        path = os.path.join(where, *item['rel'].split('/'))
        if image and os.path.exists(path + '.unpacked'):
            continue
        for tries in range(2):
            kept = os.path.exists(path)
            retried(lambda: oci.fetch(item, path))
            digest = hashlib.sha256()
            with open(path, 'rb') as f:
                for chunk in iter(lambda: f.read(1 << 20), b''):
                    digest.update(chunk)
            got = 'sha256:' + digest.hexdigest()
            if got == item['digest']:
                break
            os.remove(path)
            if not kept or tries:
                what = 'the layer ' + item['digest'] if image else item['rel'] + ' is not the layer ' + item['digest']
                fail('WeightsCorrupt', what + ' of ' + oci.where + ': its digest is ' + got)
        if image:
            oci_unpack(path, partial, os.environ.get('FERRY_OCI_PATH') or '/models')
            open(path + '.unpacked', 'w').close()
    if not image:
        return len(files)
    shutil.rmtree(where, ignore_errors=True)
    count = sum(len(names) for _root, _dirs, names in os.walk(partial))
    if not count:
        fail('SourceNotFound', oci.where + ' has no files under ' + (os.environ.get('FERRY_OCI_PATH') or '/models') + ' in its image: set source.oci.path to the directory of the weights')
    return count


def oci_unpack(blob, partial, directory):
    """The files of a layer under directory into partial; a whiteout (.wh.<name>, .wh..wh..opq) removes what earlier
    layers put there. Anything that would land outside partial, links and special files are skipped."""
    root = directory.strip('/') + '/'
    top = os.path.realpath(partial)
    with tarfile.open(blob, 'r:*') as tar:
        for member in tar:
            name = member.name.lstrip('/')
            while name.startswith('./'):
                name = name[2:]
            if not name.startswith(root) or name == root:
                continue
            parts = name[len(root):].rstrip('/').split('/')
            if any(part in ('', '.', '..') for part in parts):
                continue
            target = os.path.join(partial, *parts)
            parent = os.path.dirname(target)
            if not (os.path.realpath(parent) + '/').startswith(top + '/'):
                continue
            base = parts[-1]
            if base == '.wh..wh..opq':
                for entry in os.listdir(parent) if os.path.isdir(parent) else []:
                    gone = os.path.join(parent, entry)
                    shutil.rmtree(gone) if os.path.isdir(gone) and not os.path.islink(gone) else os.remove(gone)
                continue
            if base.startswith('.wh.'):
                gone = os.path.join(parent, base[len('.wh.'):])
                if os.path.isdir(gone) and not os.path.islink(gone):
                    shutil.rmtree(gone)
                elif os.path.lexists(gone):
                    os.remove(gone)
                continue
            if member.isdir():
                os.makedirs(target, exist_ok=True)
            elif member.isfile():
                os.makedirs(parent, exist_ok=True)
                if os.path.lexists(target) and not os.path.isfile(target):
                    shutil.rmtree(target) if os.path.isdir(target) else os.remove(target)
                with tar.extractfile(member) as source, open(target, 'wb') as out:
                    shutil.copyfileobj(source, out, 1 << 20)


def oci_classify(error, where):
    detail = ' (' + str(error)[:300] + ')'
    if isinstance(error, HttpError):
        if error.status == 404:
            return 'SourceNotFound', 'no such artifact: ' + where + detail
        if error.status in (401, 403):
            return 'SourceForbidden', 'the registry refused the request: check source.oci.credentialsSecret for ' + where + detail
        return 'DownloadFailed', 'the registry failed the request: ' + where + detail
    if isinstance(error, (urllib.error.URLError, socket.timeout, ConnectionError)):
        return 'SourceUnreachable', 'the registry did not answer: ' + where + ' (check the reference and source.oci.plainHttp)' + detail
    return None
`;
