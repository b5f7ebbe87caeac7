// Walks a source folder and reports entries and skipped items. No network. May import main/api,
// and protocol for the order of a folder's names.
export * from './walk-source.ts';
export * from './skipped-item.ts';
export * from './exclude-rules.ts';
export * from './own-folders.ts';
export * from './cache-folders.ts';
export * from './source-folder.ts';
export * from './source-file.ts';
export * from './same-folder.ts';
export * from './inode-numbers.ts';
export type { EntryStats } from './folder-reader.ts';
