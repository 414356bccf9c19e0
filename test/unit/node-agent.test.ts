// The local node agent's pure parts: the kubelet's log tail, the atomic writer of configMap and secret volumes, and
// the shell quoting of the scripts that set a container up. The agent as a whole runs real pods in
// test/integration/real-engine/.
import { mkdtempSync, readFileSync, readlinkSync, readdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tail } from '../../deploy/local/node-agent/kubelet-server.js';
import { shq } from '../../deploy/local/node-agent/sandbox.js';
import { projectFiles } from '../../deploy/local/node-agent/volumes.js';

const text = (s: string) => Buffer.from(s);

describe('the kubelet log tail', () => {
  it('keeps the last lines, with or without a final newline, then cuts to limitBytes', () => {
    expect(tail(text('a\nb\nc\n'), 2).toString()).toBe('b\nc\n');
    expect(tail(text('a\nb\nc'), 2).toString()).toBe('b\nc');
    expect(tail(text('a\nb\nc\n'), 10).toString()).toBe('a\nb\nc\n');
    expect(tail(text('a\nb\nc\n'), 0).toString()).toBe('');
    expect(tail(text('a\nb\nc\n')).toString()).toBe('a\nb\nc\n');
    expect(tail(text('abcdef\n'), undefined, 3).toString()).toBe('abc');
  });
});

describe('configMap and secret volumes', () => {
  it('swap their files in at once through ..data and report whether anything changed', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ferry-agent-volume-'));
    const files = (v: string) => new Map([['nginx.conf', { content: text(v), mode: 0o644 }]]);
    expect(projectFiles(dir, files('one'))).toBe(true);
    expect(readFileSync(join(dir, 'nginx.conf'), 'utf8')).toBe('one');
    expect(readlinkSync(join(dir, 'nginx.conf'))).toBe('..data/nginx.conf');
    const first = readlinkSync(join(dir, '..data'));
    expect(projectFiles(dir, files('one'))).toBe(false);
    expect(projectFiles(dir, files('two'))).toBe(true);
    expect(readFileSync(join(dir, 'nginx.conf'), 'utf8')).toBe('two');
    expect(readlinkSync(join(dir, '..data'))).not.toBe(first);
    expect(readdirSync(dir).filter((n) => n === '..data_tmp')).toEqual([]);
  });
});

describe('shell quoting', () => {
  it('gives sh back every string as it was', () => {
    for (const s of ["it's", 'a b', '$(rm -rf /)', '`x`', '"q"', 'new\nline', '']) {
      expect(execFileSync('/bin/sh', ['-c', `printf %s ${shq(s)}`], { encoding: 'utf8' })).toBe(s);
    }
  });
});
