import { isCidText, parseCidText, type ProtocolCid } from './cid.ts';
import { isFingerprint, isUuid } from './ids.ts';
import { parseP384PublicKeyPem, PublicKeyError, type P384PublicKey } from './p384-public-key.ts';
import {
  codePointLength,
  hasControlCharacter,
  isWellFormedUnicode,
  trimWhiteSpace,
} from './text.ts';
import { ValidationError } from './validation-error.ts';

// Field rules for request bodies (§2.5). Each takes the raw JSON value and the field name and
// returns the typed value or throws ValidationError naming the field.

export type JsonRecord = Record<string, unknown>;

/**
 * Checks the body is a JSON object holding only `allowed` keys and all `required` ones. An
 * unknown field is reported first: rejecting it is what stops mass assignment (§16.7).
 */
export function expectObject(
  body: unknown,
  allowed: readonly string[],
  required: readonly string[],
  what = 'body',
): JsonRecord {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ValidationError(what, 'must be a JSON object');
  }
  const record = body as JsonRecord;
  for (const key of Object.keys(record)) {
    if (!allowed.includes(key)) throw new ValidationError(key, 'unknown field');
  }
  for (const key of required) {
    if (!Object.hasOwn(record, key)) throw new ValidationError(key, 'is required');
  }
  return record;
}

export function textField(value: unknown, field: string, min: number, max: number): string {
  if (typeof value !== 'string') throw new ValidationError(field, 'must be a string');
  const trimmed = trimWhiteSpace(value);
  const length = codePointLength(trimmed);
  if (length < min || length > max) {
    throw new ValidationError(field, `must be ${min}-${max} characters`);
  }
  if (hasControlCharacter(trimmed)) {
    throw new ValidationError(field, 'must not contain control characters');
  }
  if (!isWellFormedUnicode(trimmed)) throw new ValidationError(field, 'must be valid Unicode');
  return trimmed;
}

export function enumField<T extends string>(
  value: unknown,
  field: string,
  options: readonly T[],
): T {
  if (typeof value !== 'string' || !(options as readonly string[]).includes(value)) {
    throw new ValidationError(field, `must be one of ${options.join(', ')}`);
  }
  return value as T;
}

export function integerField(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
    throw new ValidationError(field, 'must be an integer');
  }
  if (value < min || value > max) throw new ValidationError(field, `must be ${min}-${max}`);
  return value;
}

export function stringField(value: unknown, field: string, maxLength = 1024): string {
  if (typeof value !== 'string') throw new ValidationError(field, 'must be a string');
  if (value.length > maxLength) throw new ValidationError(field, 'is too long');
  return value;
}

export function uuidField(value: unknown, field: string): string {
  if (!isUuid(value)) throw new ValidationError(field, 'must be a lowercase UUID');
  return value;
}

export function nullableUuidField(value: unknown, field: string): string | null {
  return value === null ? null : uuidField(value, field);
}

const CID_RULE = 'must be a CIDv1 (base32, sha2-256)';

export function cidField(value: unknown, field: string): ProtocolCid {
  const cid = parseCidText(value);
  if (!cid) throw new ValidationError(field, CID_RULE);
  return cid;
}

/** A list of CIDs' outer rules: an array, of `min` to `max` entries. */
function cidArray(value: unknown, field: string, min: number, max: number): unknown[] {
  if (!Array.isArray(value)) throw new ValidationError(field, 'must be an array of CIDs');
  if (value.length < min || value.length > max) {
    throw new ValidationError(field, `must hold ${min}-${max} CIDs`);
  }
  return value;
}

export function cidListField(
  value: unknown,
  field: string,
  min: number,
  max: number,
): ProtocolCid[] {
  return cidArray(value, field, min, max).map((item, index) => cidField(item, `${field}.${index}`));
}

/** cidListField's rules and messages, for callers that need only the CIDs' text. */
export function cidTextListField(
  value: unknown,
  field: string,
  min: number,
  max: number,
): string[] {
  return cidArray(value, field, min, max).map((item, index) => {
    if (!isCidText(item)) throw new ValidationError(`${field}.${index}`, CID_RULE);
    return item;
  });
}

export function fingerprintListField(value: unknown, field: string, max: number): string[] {
  if (!Array.isArray(value)) throw new ValidationError(field, 'must be an array of fingerprints');
  if (value.length > max) throw new ValidationError(field, `must hold at most ${max} entries`);
  return value.map((item, index) => {
    if (!isFingerprint(item)) {
      throw new ValidationError(`${field}.${index}`, 'must be a lowercase 40-hex fingerprint');
    }
    return item;
  });
}

export function pemField(value: unknown, field: string): P384PublicKey {
  if (typeof value !== 'string' || value.length > 4096) {
    throw new ValidationError(field, 'must be a P-384 public key PEM');
  }
  try {
    return parseP384PublicKeyPem(value);
  } catch (error) {
    if (error instanceof PublicKeyError) {
      throw new ValidationError(field, `must be a P-384 public key PEM (${error.message})`);
    }
    throw error;
  }
}
