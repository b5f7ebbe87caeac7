import os from 'node:os';
import Database from 'better-sqlite3';
import type { StateDb } from './database.ts';

// The name of this computer in its backups' source labels (`host:/folder`, §17.3), by which a
// bucket knows its source folder and a restore finds the folder a version came from. The host
// name the system gives is not steady: a laptop's can follow the network it is on (macOS names
// itself from DHCP or reverse DNS when no name was set; a Linux one may take the name DHCP
// hands it), and a user may rename the computer. Read afresh for each backup, the same folder
// of the same computer was refused as another source ("this bucket holds backups of
// home-mac:/Users/ann/Pictures, not of dhcp-10-0-1-7:/Users/ann/Pictures") and a restore to
// where the files came from was told they came from another computer. So the name is taken
// once, the first time a backup or a restore needs it, and kept with the rest of this home's
// state (280-record-computer-name.sql).

/** This computer's name in source labels: the one kept, else its host name now, kept from then on. */
export function computerName(db: StateDb, hostName: () => string = () => os.hostname()): string {
  const kept = db.prepare<[], string>('SELECT name FROM computer_name WHERE id = 1').pluck().get();
  if (kept !== undefined) return kept;
  // A label's host ends at its first colon (source-label.ts); no host name holds one.
  const name = hostName().replaceAll(':', '-');
  try {
    // Another process may have kept one first: the first kept stays.
    db.prepare(
      'INSERT INTO computer_name (id, name) VALUES (1, ?) ON CONFLICT (id) DO NOTHING',
    ).run(name);
  } catch (error) {
    // Another process writing to the state for longer than a request waits: the name is the
    // host name now all the same, kept by the next call that can write.
    if (error instanceof Database.SqliteError && error.code === 'SQLITE_BUSY') return name;
    throw error;
  }
  return (
    db.prepare<[], string>('SELECT name FROM computer_name WHERE id = 1').pluck().get() ?? name
  );
}
