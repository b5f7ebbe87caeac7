import { randomUUID } from 'node:crypto';

// Only the lowercase forms are well-formed (§3); upper case is treated like any other miss.
const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const FINGERPRINT_PATTERN = /^[0-9a-f]{40}$/;

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID_PATTERN.test(value);
}

export function isFingerprint(value: unknown): value is string {
  return typeof value === 'string' && FINGERPRINT_PATTERN.test(value);
}

/** A random (version 4) UUID in lowercase, the only form the service mints (§2.7). */
export function newUuid(): string {
  return randomUUID();
}
