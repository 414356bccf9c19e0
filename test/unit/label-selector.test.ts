// Label selectors as kubectl's -l reads them: each form, commas as AND, and an error that names what is wrong.
import { describe, expect, it } from 'vitest';
import { matchesSelector, parseLabelSelector } from '../../client/label-selector.js';

const matches = (selector: string, labels: Record<string, string>) =>
  matchesSelector(labels, parseLabelSelector(selector));

const errorOf = (selector: string): string => {
  try {
    parseLabelSelector(selector);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error(`parsed without error: ${selector}`);
};

describe('parseLabelSelector', () => {
  it('reads the equality, set and existence forms', () => {
    expect(parseLabelSelector('team=chat')).toEqual([{ key: 'team', operator: 'in', values: ['chat'] }]);
    expect(parseLabelSelector('team==chat')).toEqual([{ key: 'team', operator: 'in', values: ['chat'] }]);
    expect(parseLabelSelector('team!=chat')).toEqual([{ key: 'team', operator: 'notin', values: ['chat'] }]);
    expect(parseLabelSelector('tier in (gold, silver)')).toEqual([
      { key: 'tier', operator: 'in', values: ['gold', 'silver'] },
    ]);
    expect(parseLabelSelector('tier notin (free)')).toEqual([{ key: 'tier', operator: 'notin', values: ['free'] }]);
    expect(parseLabelSelector('example.com/gpu')).toEqual([{ key: 'example.com/gpu', operator: 'exists' }]);
    expect(parseLabelSelector('!canary')).toEqual([{ key: 'canary', operator: 'doesnotexist' }]);
    // An empty value is a label value (`a=`), as in Kubernetes.
    expect(parseLabelSelector('a=')).toEqual([{ key: 'a', operator: 'in', values: [''] }]);
  });

  it('splits at commas outside a set, trimming spaces', () => {
    expect(parseLabelSelector(' team = chat , tier in (gold,silver), !canary ')).toEqual([
      { key: 'team', operator: 'in', values: ['chat'] },
      { key: 'tier', operator: 'in', values: ['gold', 'silver'] },
      { key: 'canary', operator: 'doesnotexist' },
    ]);
  });

  it('names what is wrong with a bad selector', () => {
    expect(errorOf('')).toBe(
      'the selector is empty: write requirements like a=b, a==b, a!=b, a in (x,y), a notin (x), a or !a, joined by commas',
    );
    expect(errorOf('team=chat,')).toMatch(/^an empty requirement \(two commas in a row, or one at an end\)/);
    expect(errorOf('tier in (gold')).toBe('a "(" without its ")" in "tier in (gold"');
    expect(errorOf('tier in gold)')).toBe('a ")" without its "(" at position 12 of "tier in gold)"');
    expect(errorOf('tier in ()')).toBe('"tier in ()": in needs at least one value, like (x,y)');
    expect(errorOf('Team Name=chat')).toMatch(/^cannot read "Team Name=chat" as a requirement: use a=b/);
    expect(errorOf('-team=chat')).toBe(
      '"-team=chat": "-team" is not a label key: its name part must be 1-63 letters, digits, "-", "_" or ".", ' +
        'starting and ending with a letter or digit',
    );
    expect(errorOf('team=chat room')).toMatch(/^"team=chat room": the label value "chat room" must be at most 63/);
    expect(errorOf('gpus>2')).toMatch(/^"gpus>2": < and > are not label selector operators here/);
    expect(errorOf(`team=${'x'.repeat(64)}`)).toMatch(/the label value .* must be at most 63 letters/);
  });
});

describe('matchesSelector', () => {
  const labels = { team: 'chat', tier: 'gold' };

  it('holds every requirement (comma is AND)', () => {
    expect(matches('team=chat', labels)).toBe(true);
    expect(matches('team=chat,tier=gold', labels)).toBe(true);
    expect(matches('team=chat,tier=silver', labels)).toBe(false);
    expect(matches('team==search', labels)).toBe(false);
  });

  it('treats != and notin as true for a missing label, as Kubernetes does', () => {
    expect(matches('team!=chat', labels)).toBe(false);
    expect(matches('team!=search', labels)).toBe(true);
    expect(matches('owner!=me', labels)).toBe(true);
    expect(matches('owner notin (me)', labels)).toBe(true);
    expect(matches('tier notin (gold,silver)', labels)).toBe(false);
  });

  it('needs the label for = and in, and reads existence', () => {
    expect(matches('tier in (silver,gold)', labels)).toBe(true);
    expect(matches('owner in (me)', labels)).toBe(false);
    expect(matches('team', labels)).toBe(true);
    expect(matches('owner', labels)).toBe(false);
    expect(matches('!owner', labels)).toBe(true);
    expect(matches('!team', labels)).toBe(false);
    expect(matches('team', {})).toBe(false);
  });
});
