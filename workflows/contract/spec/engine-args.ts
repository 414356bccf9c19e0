// engine.args read as vLLM reads them: Ferry's own flags refused, every item a flag or a value its flag takes; and
// asAcceptedBefore, which relaxes the rules added later for replays. Pure (no Node): it is bundled into workflow code.
import { acceptedBefore } from './accepted-before.js';
import { quote } from './rules.js';
import { PRINTABLE_CHARACTER } from './text.js';
import { VLLM_FLAG_VALUES } from './vllm-flags.js';

// Flags Ferry sets itself, and the fields that replace them. vLLM reads `--api_key` as `--api-key`.
const FERRY_FLAGS: Record<string, string> = {
  '--api-key':
    'must not be passed as an argument (arguments are visible in the pod spec and process list); set engine.apiKeySecret and Ferry passes the key as VLLM_API_KEY from the Secret',
  '--model': 'is set by Ferry to the weights on the volume; choose the weights with spec.source',
  '--served-model-name': 'is set by Ferry; use engine.servedModelName',
  '--port': 'is set by Ferry; use engine.port',
};

// `--port` as vLLM reads it and its prefixes: "p(?:o(?:r(?:t)?)?)?", "_" for "-" anywhere.
function prefixesOf(flag: string): string {
  let out = '';
  for (const char of [...flag.slice(2)].reverse()) out = `${char === '-' ? '[-_]' : char}${out && `(?:${out})?`}`;
  return out;
}

// The items argProblem refuses: a flag with a space before its "=", or one vLLM reads as a flag Ferry sets (the
// flag, or a prefix of it of at least one letter after "--"; "_" reads as "-").
const REFUSED_ARG = `-[^=]*\\s|-[-_](?:${Object.keys(FERRY_FLAGS).map(prefixesOf).join('|')})(?:=|$)`;
const REFUSED = new RegExp(`^(?:${REFUSED_ARG})`, 'u');
/** An item of engine.args the JSON Schema accepts: none argProblem refuses, every character printable. */
export const ENGINE_ARG = new RegExp(`^(?!${REFUSED_ARG})${PRINTABLE_CHARACTER}*$`, 'u');

export function argProblem(arg: string): string | undefined {
  if (!REFUSED.test(arg)) return undefined;
  const flag = arg.split('=', 1)[0]!;
  if (/\s/.test(flag)) {
    return `${quote(arg)} is one argument with a space in it; write "--flag=value" or put the flag and the value in two list items`;
  }
  const normalized = flag.replace(/_/g, '-');
  const reason = FERRY_FLAGS[normalized];
  if (reason) return `${normalized} ${reason}`;
  // argparse also takes a prefix of a long option as that option (--por=9 is --port=9, --served-model is
  // --served-model-name); a prefix of one of Ferry's flags that also starts another vLLM flag makes vLLM exit.
  if (!normalized.startsWith('--') || normalized.length < 3)
    return `${quote(flag)} is read by vLLM as a flag Ferry sets`;
  const owned = Object.keys(FERRY_FLAGS).find((ferryFlag) => ferryFlag.startsWith(normalized));
  return owned
    ? `${quote(flag)} abbreviates ${owned} (vLLM reads a prefix of a flag as the flag): ${owned} ${FERRY_FLAGS[owned]}`
    : `${quote(flag)} is read by vLLM as a flag Ferry sets`;
}

// An item of engine.args that is not a flag is read by vLLM only as a value of the flag before it, as many as that
// flag takes (VLLM_FLAG_VALUES, read from vLLM's own parser); any other item is a positional argument, which vLLM
// refuses at start-up ("unrecognized arguments"). Ferry's own flags come first, each with its value.
interface FlagItem {
  /** The item as written. */
  item: string;
  /** Its name: before "=", underscores read as dashes (as vLLM reads them). */
  name: string;
  /**
   * What may follow: the table's none/one/optional/many; unknown (a flag this vLLM does not know, from a newer or an
   * older one: anything); inline (its value is after "="); dotted (vLLM's --config.key takes the next item, whatever
   * it is); rest ("--": vLLM reads every item after it as positional).
   */
  takes: 'none' | 'one' | 'optional' | 'many' | 'unknown' | 'inline' | 'dotted' | 'rest';
  /** The values that followed it. */
  values: string[];
}

const NEGATIVE_INTEGER = /^-\d+$/;
// argparse reads these as negative numbers, but vLLM reads an item with "-" and "." as --config.key first.
const NEGATIVE_DECIMAL = /^-\d*\.\d+$/;
const UNRECOGNIZED = 'vLLM would refuse it as an unrecognized argument';

function flagItem(item: string): FlagItem {
  const written = item.split('=', 1)[0]!;
  const flag = { item, name: written.startsWith('--') ? written.replace(/_/g, '-') : written, values: [] };
  if (item === '--') return { ...flag, takes: 'rest' };
  // -O3 and -O=3 are vLLM's shorthand for --optimization-level=3.
  if (written !== item || /^-O./.test(item)) return { ...flag, takes: 'inline' };
  if (flag.name.includes('.')) return { ...flag, takes: 'dotted' };
  return { ...flag, takes: VLLM_FLAG_VALUES[flag.name] ?? 'unknown' };
}

function roomAfter(flag: FlagItem): number {
  switch (flag.takes) {
    case 'many':
    case 'unknown':
      return Infinity;
    case 'one':
    case 'optional':
    case 'dotted':
      return 1 - flag.values.length;
    default:
      return 0;
  }
}

/** A flag for a message: its name when vLLM knows it, else the item as written. */
const shown = (flag: FlagItem): string => (VLLM_FLAG_VALUES[flag.name] ? flag.name : quote(flag.item));

/** " (or --no-x)" after a boolean flag --x, " (or --x)" after --no-x. */
function otherSpelling(name: string): string {
  const other = name.startsWith('--no-') ? `--${name.slice(5)}` : `--no-${name.slice(2)}`;
  return name.startsWith('--') && VLLM_FLAG_VALUES[other] === 'none' ? ` (or ${other})` : '';
}

function notAValue(arg: string, last: FlagItem | undefined): string {
  const trimmed = arg.trimStart();
  if (trimmed !== arg && trimmed.startsWith('-')) {
    const problem = argProblem(trimmed);
    return `${quote(arg)} has leading whitespace, so it is not a flag: ${UNRECOGNIZED}; write ${quote(trimmed)}${problem ? `, though ${problem}` : ''}`;
  }
  if (!last) {
    return `${quote(arg)} is not a flag and follows no flag that takes a value: ${UNRECOGNIZED}; write it after its flag, like --max-model-len 4096 or --max-model-len=4096`;
  }
  switch (last.takes) {
    case 'none':
      return `${quote(arg)} follows ${last.name}, which takes no value: ${UNRECOGNIZED}; write ${last.name} alone${otherSpelling(last.name)}`;
    case 'inline':
      return `${quote(arg)} follows ${quote(last.item)}, which already has its value${last.item.includes('=') ? ' after "="' : ''}: ${UNRECOGNIZED}; give the flag one value, after "=" or as the next item`;
    case 'rest':
      return `${quote(arg)} follows "--", after which vLLM reads every item as a positional argument: ${UNRECOGNIZED}; remove the "--"`;
    default:
      return `${quote(arg)} follows ${shown(last)} ${last.values.map((value) => quote(value)).join(' ')}, which takes ${last.takes === 'optional' ? 'at most ' : ''}one value: ${UNRECOGNIZED}; remove it, or write it after the flag it belongs to`;
  }
}

// The positional-argument rule was added after specs were accepted without it: off inside asAcceptedBefore.

/** The items of engine.args that vLLM would refuse as positional arguments (or as a value it cannot take), by index. */
export function positionalProblems(args: readonly string[]): Map<number, string> {
  const problems = new Map<number, string>();
  if (acceptedBefore('positional')) return problems;
  let last: FlagItem | undefined;
  args.forEach((arg, index) => {
    if (last?.takes === 'dotted' && last.values.length === 0) {
      last.values.push(arg);
    } else if (arg.length > 1 && arg.startsWith('-') && !NEGATIVE_INTEGER.test(arg)) {
      if (NEGATIVE_DECIMAL.test(arg)) {
        const flag = last && roomAfter(last) > 0 ? last.name : '--flag';
        problems.set(
          index,
          `${quote(arg)} is not read as a negative number: vLLM reads an item that starts with "-" and has a "." as a --config.key setting; write the flag and its value as one item, like ${quote(`${flag}=${arg}`)}`,
        );
      }
      last = flagItem(arg);
      if (last.takes === 'inline' && VLLM_FLAG_VALUES[last.name] === 'none') {
        problems.set(
          index,
          `${quote(arg)}: ${last.name} takes no value, and vLLM refuses one after "="; write ${last.name} alone${otherSpelling(last.name)}`,
        );
      }
    } else if (last && roomAfter(last) > 0) {
      last.values.push(arg);
    } else {
      problems.set(index, notAValue(arg, last));
    }
  });
  return problems;
}
