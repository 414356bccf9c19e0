// Typed reads of a request body's fields the way vLLM's pydantic models read them (lax mode: "5" is an integer,
// "true" a boolean), collecting every failure so the 400 lists them all, as FastAPI's does.
import { validationError, type FieldError } from './http-io.js';

const TRUE_WORDS = ['1', 'on', 't', 'true', 'y', 'yes'];
const FALSE_WORDS = ['0', 'off', 'f', 'false', 'n', 'no'];

export class RequestFields {
  private readonly errors: FieldError[] = [];

  constructor(readonly body: Record<string, unknown>) {}

  invalid(error: FieldError) {
    this.errors.push(error);
  }

  /** FastAPI's 400 for every field that failed, if any did. */
  throwIfInvalid() {
    if (this.errors.length > 0) throw validationError(this.errors);
  }

  int(key: string): number | undefined {
    const value = this.body[key];
    if (value === undefined || value === null) return undefined;
    if (typeof value === 'boolean') return value ? 1 : 0;
    if (typeof value === 'number') {
      if (Number.isInteger(value)) return value;
      return this.fail(key, 'int_from_float', 'Input should be a valid integer, got a number with a fractional part');
    }
    if (typeof value === 'string') {
      if (/^\s*[+-]?\d+\s*$/.test(value)) return Number(value);
      return this.fail(key, 'int_parsing', 'Input should be a valid integer, unable to parse string as an integer');
    }
    return this.fail(key, 'int_type', 'Input should be a valid integer');
  }

  bool(key: string): boolean | undefined {
    const value = this.body[key];
    if (value === undefined || value === null) return undefined;
    if (typeof value === 'boolean') return value;
    if (typeof value === 'number' || typeof value === 'string') {
      const word = String(value).trim().toLowerCase();
      if (TRUE_WORDS.includes(word)) return true;
      if (FALSE_WORDS.includes(word)) return false;
      return this.fail(key, 'bool_parsing', 'Input should be a valid boolean, unable to interpret input');
    }
    return this.fail(key, 'bool_type', 'Input should be a valid boolean');
  }

  /** A string the model requires: missing is FastAPI's `Field required`. */
  requiredStr(key: string): string | undefined {
    if (this.body[key] === undefined) {
      this.errors.push({ type: 'missing', loc: [key], msg: 'Field required', input: this.body });
      return undefined;
    }
    return this.str(key);
  }

  str(key: string): string | undefined {
    const value = this.body[key];
    if (value === undefined || value === null) return undefined;
    if (typeof value === 'string') return value;
    return this.fail(key, 'string_type', 'Input should be a valid string');
  }

  dict(key: string): Record<string, unknown> | undefined {
    const value = this.body[key];
    if (value === undefined || value === null) return undefined;
    if (typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
    return this.fail(key, 'model_type', 'Input should be a valid dictionary');
  }

  private fail(key: string, type: string, msg: string): undefined {
    this.errors.push({ type, loc: [key], msg, input: this.body[key] });
    return undefined;
  }
}
