import { describe, expect, it } from 'vitest';
import {
  codePointLength,
  hasControlCharacter,
  textField,
  trimWhiteSpace,
} from '../../../main/protocol/index.ts';

describe('text rules (§3)', () => {
  it('trims Unicode White_Space, including U+0085, but not U+FEFF', () => {
    expect(trimWhiteSpace('\u0085\u00a0 a b \u3000\u2029')).toBe('a b');
    expect(trimWhiteSpace('\ufeffa')).toBe('\ufeffa');
  });

  it('counts code points, not UTF-16 units, and keeps NFC and NFD distinct', () => {
    expect(codePointLength('😀'.repeat(64))).toBe(64);
    expect(textField('e\u0301', 'name', 1, 64)).not.toBe(textField('é', 'name', 1, 64));
  });

  it('names the field in every refusal', () => {
    expect(() => textField('', 'name', 1, 64)).toThrow('name: must be 1-64 characters');
    expect(() => textField('a\u0000b', 'display_name', 1, 100)).toThrow(/^display_name:/);
    expect(hasControlCharacter('a\u007fb')).toBe(true);
  });
});
