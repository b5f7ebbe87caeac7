// The engine's SQLite state: the enrolled account and known buckets (later the file index and
// the upload queue). No secrets: keys live in the SecretStore. May import main/api only.

export * from './account-state.ts';
export * from './canopy-home.ts';
export * from './database.ts';
export * from './upload-queue.ts';
