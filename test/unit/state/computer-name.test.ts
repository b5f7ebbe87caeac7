import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { computerName, openStateDatabase } from '../../../main/state/index.ts';

// This computer's name in its backups' source labels is the host name it had the first time one
// was needed, whatever the host name is later; it survives the database being opened again.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-computer-name-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('computerName', () => {
  it('keeps the first host name it is given, through later ones and a reopening', () => {
    const file = path.join(scratch, 'state.sqlite');
    const db = openStateDatabase(file);
    expect(computerName(db, () => 'home-mac')).toBe('home-mac');
    expect(computerName(db, () => 'dhcp-10-0-1-7')).toBe('home-mac');
    db.close();
    const again = openStateDatabase(file);
    expect(computerName(again, () => 'renamed')).toBe('home-mac');
    again.close();
  });

  it('keeps no colon, which would end the host part of a label', () => {
    const db = openStateDatabase(path.join(scratch, 'odd.sqlite'));
    expect(computerName(db, () => 'fe80::1')).toBe('fe80--1');
    db.close();
  });
});
