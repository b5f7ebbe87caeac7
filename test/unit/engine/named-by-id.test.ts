import { describe, expect, it } from 'vitest';
import { namedById } from '../../../main/engine/named-by-id.ts';

// A user names a version or snapshot by its whole id, pasted, or by its start, typed.

const versions = [
  { id: 'b37870d9-ecdb-4a59-a9b7-1145c6884f49' },
  { id: '3aeb5412-c3f7-476b-9dfa-672e17984da5' },
  { id: '3aeb9f00-0000-4000-8000-000000000001' },
];
const what = 'versions of bucket "Photos"';

describe('namedById', () => {
  it('takes a whole id, or the start of one no other id begins with, in either case', () => {
    expect(namedById(versions, '3aeb5412-c3f7-476b-9dfa-672e17984da5', what)).toBe(versions[1]);
    expect(namedById(versions, 'b378', what)).toBe(versions[0]);
    expect(namedById(versions, 'B37870D9-ECDB', what)).toBe(versions[0]);
    expect(namedById(versions, '3aeb54', what)).toBe(versions[1]);
  });

  it('names none for what begins no id', () => {
    expect(namedById(versions, 'ffff', what)).toBeUndefined();
    expect(namedById(versions, 'b37870d9-ecdb-4a59-a9b7-1145c6884f4', what)?.id).toBe(
      versions[0]?.id,
    );
    expect(namedById(versions, 'b37870d9-ecdb-4a59-a9b7-1145c6884f490', what)).toBeUndefined();
    expect(namedById(versions, '', what)).toBeUndefined();
    expect(namedById([], 'b378', what)).toBeUndefined();
  });

  it('refuses a start several ids share, naming them, and one too short to name one surely', () => {
    expect(() => namedById(versions, '3aeb', what)).toThrow(
      expect.objectContaining({
        code: 'usage',
        message:
          '3aeb is the start of 2 versions of bucket "Photos" (3aeb5412-c3f7-476b-9dfa-672e17984da5, 3aeb9f00-0000-4000-8000-000000000001); give more of the id',
      }),
    );
    // Unique among these, but three characters would soon name several.
    expect(() => namedById(versions, 'b37', what)).toThrow(
      expect.objectContaining({
        code: 'usage',
        message:
          'b37 is too short to name one of the versions of bucket "Photos"; give at least 4 characters of its id',
      }),
    );
  });
});
