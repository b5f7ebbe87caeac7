// Text rules of §3: trim Unicode White_Space (not ECMAScript's set, which differs at U+0085 and
// U+FEFF), count code points, no normalization.

const LEADING_WHITE_SPACE = /^\p{White_Space}+/u;
const TRAILING_WHITE_SPACE = /\p{White_Space}+$/u;
const CONTROL_CHARACTER = /\p{Cc}/u;

export function trimWhiteSpace(value: string): string {
  return value.replace(LEADING_WHITE_SPACE, '').replace(TRAILING_WHITE_SPACE, '');
}

export function codePointLength(value: string): number {
  return Array.from(value).length;
}

export function hasControlCharacter(value: string): boolean {
  return CONTROL_CHARACTER.test(value);
}

/** Unpaired surrogates cannot be stored as UTF-8 and would sort unpredictably; reject them. */
export function isWellFormedUnicode(value: string): boolean {
  return !/\p{Surrogate}/u.test(value);
}
