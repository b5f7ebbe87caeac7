import { describe, expect, it } from 'vitest';
import { counted } from '../../../cli/counted.ts';

describe('counted', () => {
  it('says one thing in the singular, and none or many in the plural', () => {
    expect(counted(1, 'symlink')).toBe('1 symlink');
    expect(counted(0, 'file')).toBe('0 files');
    expect(counted(2, 'folder')).toBe('2 folders');
    expect(counted(3, 'file or folder', 'files and folders')).toBe('3 files and folders');
  });
});
