import { createHash, randomBytes } from 'node:crypto';

// Enrollment codes (§8.1): 125 random bits as 25 Crockford base32 characters, shown in groups
// of five. Only the SHA-256 of the normalized form is ever stored.

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const CODE_LENGTH = 25;

export function generateEnrollmentCode(): string {
  const bytes = randomBytes(CODE_LENGTH);
  let code = '';
  for (const byte of bytes) code += CROCKFORD[byte & 31];
  return code.match(/.{5}/g)?.join('-') ?? code;
}

/** Uppercases, drops spaces and hyphens, maps I and L to 1 and O to 0. */
export function normalizeEnrollmentCode(input: string): string {
  return input
    .toUpperCase()
    .replace(/[\s-]+/g, '')
    .replace(/[IL]/g, '1')
    .replace(/O/g, '0');
}

export function hashEnrollmentCode(input: string): string {
  return createHash('sha256').update(normalizeEnrollmentCode(input), 'utf8').digest('hex');
}
