// Rules between the fields of one object ("when operator is Exists, value is empty"), each written once: the
// parser checks it and the JSON Schema says it as if/then, both read from the same rule (`withFieldRules`). Pure.
import type { z } from 'zod';

/** What a field is: set or unset, or a value (`orUnset`: unset counts too, as the field's default is that value). */
type FieldIs = { field: string; set: boolean } | { field: string; is: string | boolean; orUnset?: boolean };

export interface FieldRule {
  when: FieldIs;
  then: FieldIs;
  /** The field the issue is about; unset: the object itself. */
  at?: string;
  message: string;
}

function holds(object: Readonly<Record<string, unknown>>, condition: FieldIs): boolean {
  const value = object[condition.field];
  if ('set' in condition) return (value !== undefined) === condition.set;
  return value === condition.is || (value === undefined && condition.orUnset === true);
}

// As JSON Schema sees the object: a value as written, a field left out where the parser fills its default. A field
// `required` names is in `properties` beside it, as strict validators (Ajv's strictRequired) ask.
function asJson(condition: FieldIs) {
  const { field } = condition;
  if ('set' in condition) {
    const set = { required: [field], properties: { [field]: {} } };
    return condition.set ? set : { not: set };
  }
  const is = { properties: { [field]: { const: condition.is } } };
  return condition.orUnset ? is : { required: [field], ...is };
}

/** `schema` with `rules` checked by the parser and stated in its JSON Schema (an if/then each, under allOf). */
export function withFieldRules<S extends z.ZodType<Readonly<Record<string, unknown>>>>(
  schema: S,
  rules: readonly FieldRule[],
): S {
  return schema
    .superRefine((object, ctx) => {
      for (const rule of rules) {
        if (holds(object, rule.when) && !holds(object, rule.then)) {
          ctx.addIssue({ code: 'custom', path: rule.at === undefined ? [] : [rule.at], message: rule.message });
        }
      }
    })
    .meta({ allOf: rules.map((rule) => ({ if: asJson(rule.when), then: asJson(rule.then) })) });
}
