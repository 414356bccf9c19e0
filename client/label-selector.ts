// Label selectors as kubectl's `-l` reads them (k8s.io/apimachinery/pkg/labels): `a=b`, `a==b`, `a!=b`,
// `a in (x,y)`, `a notin (x)`, `a`, `!a`, joined by commas (all must hold). Pure and zod-free: the CLI's parser checks
// a selector before anything loads, and `listModels` matches it against each model's `metadata.labels`.
import { labelValueProblem, qualifiedNameProblem } from '../workflows/contract/spec/names.js';
import { quote } from '../workflows/contract/spec/text.js';

/** One requirement; `=`/`==` are `in` with one value and `!=` is `notin` with one, as in Kubernetes. */
export type LabelRequirement =
  { key: string; operator: 'in' | 'notin'; values: string[] } | { key: string; operator: 'exists' | 'doesnotexist' };

const FORMS = 'a=b, a==b, a!=b, a in (x,y), a notin (x), a or !a, joined by commas';

/** The requirements of `selector`, all of which a model's labels must meet; throws an Error saying what is wrong. */
export function parseLabelSelector(selector: string): LabelRequirement[] {
  if (selector.trim() === '') throw new Error(`the selector is empty: write requirements like ${FORMS}`);
  return splitRequirements(selector).map(requirement);
}

/** Whether `labels` meet every requirement. */
export function matchesSelector(labels: Readonly<Record<string, string>>, requirements: LabelRequirement[]): boolean {
  return requirements.every((r) => {
    const has = Object.hasOwn(labels, r.key);
    switch (r.operator) {
      case 'exists':
        return has;
      case 'doesnotexist':
        return !has;
      case 'in':
        return has && r.values.includes(labels[r.key]!);
      case 'notin':
        return !has || !r.values.includes(labels[r.key]!);
    }
  });
}

/** The requirements' texts: split at the commas that are not inside a set's parentheses. */
function splitRequirements(selector: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (c === '(') depth++;
    if (c === ')' && --depth < 0) throw new Error(`a ")" without its "(" at position ${i} of ${quote(selector)}`);
    if (c === ',' && depth === 0) {
      parts.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  if (depth > 0) throw new Error(`a "(" without its ")" in ${quote(selector)}`);
  parts.push(selector.slice(start));
  return parts.map((p) => p.trim());
}

const SET = /^(\S+?)\s+(in|notin)\s*\((.*)\)$/s;
const EQUALITY = /^([^\s=!<>()]+)\s*(==|=|!=)\s*(.*)$/s;
const NOT_EXISTS = /^!\s*([^\s=!<>()]+)$/;
const EXISTS = /^[^\s=!<>()]+$/;

function requirement(text: string): LabelRequirement {
  if (text === '') throw new Error(`an empty requirement (two commas in a row, or one at an end): write ${FORMS}`);
  const set = SET.exec(text);
  if (set) {
    const [, key, operator, list] = set as unknown as [string, string, 'in' | 'notin', string];
    const values = list.split(',').map((v) => v.trim());
    if (list.trim() === '') throw new Error(`${quote(text)}: ${operator} needs at least one value, like (x,y)`);
    return { key: checkedKey(key, text), operator, values: values.map((v) => checkedValue(v, text)) };
  }
  const equality = EQUALITY.exec(text);
  if (equality) {
    const [, key, operator, value] = equality as unknown as [string, string, string, string];
    return {
      key: checkedKey(key, text),
      operator: operator === '!=' ? 'notin' : 'in',
      values: [checkedValue(value.trim(), text)],
    };
  }
  const absent = NOT_EXISTS.exec(text);
  if (absent) return { key: checkedKey(absent[1]!, text), operator: 'doesnotexist' };
  if (EXISTS.test(text)) return { key: checkedKey(text, text), operator: 'exists' };
  if (/[<>]/.test(text)) throw new Error(`${quote(text)}: < and > are not label selector operators here; use ${FORMS}`);
  throw new Error(`cannot read ${quote(text)} as a requirement: use ${FORMS}`);
}

function checkedKey(key: string, text: string): string {
  const problem = qualifiedNameProblem(key);
  if (problem) throw new Error(`${quote(text)}: ${quote(key)} is not a label key: ${problem}`);
  return key;
}

function checkedValue(value: string, text: string): string {
  const problem = labelValueProblem(value);
  if (problem) throw new Error(`${quote(text)}: the label value ${quote(value)} ${problem}`);
  return value;
}
