// A small S3 client for the local stack and its tests: path-style requests signed with Signature Version 4
// (node:crypto), enough to make buckets, put objects (in one piece or in parts) and list them. Ferry's puller has its
// own client in Python (activities/builders/puller-s3.ts); this one only seeds and shapes the local store.
import { createHash, createHmac } from 'node:crypto';

interface S3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
}

export interface S3ClientOptions extends S3Credentials {
  /** http://host:port, no path. */
  endpoint: string;
  region?: string;
}

class S3RequestError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(`${status} ${code}: ${message}`);
  }
}

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();
// RFC 3986 unreserved characters stay; everything else is percent-encoded (S3's canonical form).
const encode = (s: string) =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

export class S3Client {
  private readonly endpoint: URL;
  private readonly region: string;

  constructor(private readonly options: S3ClientOptions) {
    this.endpoint = new URL(options.endpoint);
    this.region = options.region ?? 'us-east-1';
  }

  /** One signed request; throws S3RequestError for a status of 300 or more. */
  async request(
    method: string,
    bucket: string,
    key = '',
    init: { query?: Record<string, string>; body?: Buffer; headers?: Record<string, string> } = {},
  ): Promise<Response> {
    const path = `/${encode(bucket)}${key ? `/${key.split('/').map(encode).join('/')}` : ''}`;
    const query = Object.entries(init.query ?? {})
      .map(([k, v]) => `${encode(k)}=${encode(v)}`)
      .sort()
      .join('&');
    const body = init.body ?? Buffer.alloc(0);
    const amzDate = new Date()
      .toISOString()
      .replace(/[-:]/g, '')
      .replace(/\.\d{3}/, '');
    const day = amzDate.slice(0, 8);
    const headers: Record<string, string> = {
      host: this.endpoint.host,
      'x-amz-content-sha256': sha256(body),
      'x-amz-date': amzDate,
    };
    const names = Object.keys(headers).sort();
    const canonical = [
      method,
      path,
      query,
      names.map((n) => `${n}:${headers[n]}\n`).join(''),
      names.join(';'),
      headers['x-amz-content-sha256'],
    ].join('\n');
    const scope = `${day}/${this.region}/s3/aws4_request`;
    const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonical)].join('\n');
    let signingKey = hmac(`AWS4${this.options.secretAccessKey}`, day);
    for (const part of [this.region, 's3', 'aws4_request']) signingKey = hmac(signingKey, part);
    const signature = createHmac('sha256', signingKey).update(toSign).digest('hex');
    const { host: _host, ...sent } = headers;
    const response = await fetch(`${this.endpoint.origin}${path}${query ? `?${query}` : ''}`, {
      method,
      body: method === 'GET' || method === 'HEAD' ? undefined : body,
      redirect: 'manual',
      headers: {
        ...sent,
        ...init.headers,
        authorization: `AWS4-HMAC-SHA256 Credential=${this.options.accessKeyId}/${scope}, SignedHeaders=${names.join(';')}, Signature=${signature}`,
      },
    });
    if (response.status >= 300) {
      const text = await response.text();
      const code = /<Code>([^<]*)<\/Code>/.exec(text)?.[1] ?? `HTTP${response.status}`;
      const message = /<Message>([^<]*)<\/Message>/.exec(text)?.[1] ?? text.slice(0, 200);
      throw new S3RequestError(response.status, code, message);
    }
    return response;
  }

  /** Makes the bucket; one that is already this owner's is fine. */
  async createBucket(bucket: string): Promise<void> {
    try {
      await (await this.request('PUT', bucket)).arrayBuffer();
    } catch (err) {
      if (!(err instanceof S3RequestError && err.code === 'BucketAlreadyOwnedByYou')) throw err;
    }
  }

  /** Puts an object in one piece; returns its ETag (unquoted). */
  async putObject(bucket: string, key: string, body: Buffer): Promise<string> {
    const response = await this.request('PUT', bucket, key, { body });
    await response.arrayBuffer();
    return (response.headers.get('etag') ?? '').replace(/"/g, '');
  }

  /** Puts an object as a multipart upload of parts of `partSize` bytes; returns its ETag (unquoted, `<md5>-<parts>`). */
  async putObjectInParts(bucket: string, key: string, body: Buffer, partSize: number): Promise<string> {
    const created = await (await this.request('POST', bucket, key, { query: { uploads: '' } })).text();
    const uploadId = /<UploadId>([^<]*)<\/UploadId>/.exec(created)?.[1];
    if (!uploadId) throw new Error(`CreateMultipartUpload answered without an UploadId: ${created.slice(0, 200)}`);
    const parts: string[] = [];
    for (let offset = 0, n = 1; offset < body.length; offset += partSize, n++) {
      const response = await this.request('PUT', bucket, key, {
        query: { partNumber: String(n), uploadId },
        body: body.subarray(offset, offset + partSize),
      });
      await response.arrayBuffer();
      parts.push(`<Part><PartNumber>${n}</PartNumber><ETag>${response.headers.get('etag')}</ETag></Part>`);
    }
    const xml = `<CompleteMultipartUpload>${parts.join('')}</CompleteMultipartUpload>`;
    const done = await (
      await this.request('POST', bucket, key, { query: { uploadId }, body: Buffer.from(xml) })
    ).text();
    return (/<ETag>([^<]*)<\/ETag>/.exec(done)?.[1] ?? '').replace(/&quot;|&#34;|"/g, '');
  }

  /** The keys under a prefix (the first 1,000). */
  async listKeys(bucket: string, prefix = ''): Promise<string[]> {
    const text = await (await this.request('GET', bucket, '', { query: { 'list-type': '2', prefix } })).text();
    return [...text.matchAll(/<Key>([^<]*)<\/Key>/g)].map((m) => m[1]!);
  }
}
