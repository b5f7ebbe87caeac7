// Metadata CAR to a tree on disk, blocks fetched and verified. May import main/api, protocol,
// service, uploader (for the tree index), scanner (to read a file already there as a backup
// reads one) and packer (its chunk size and leaf lists).
export type { RestoredFileOnDisk } from './file-as-left.ts';
export * from './files-needing-blocks.ts';
export * from './left-temporaries.ts';
export { giveModesBack, type OpenedFolder } from './opened-folders.ts';
export type { RestoredAs } from './restored-copies.ts';
export * from './original-place.ts';
export * from './restore-version.ts';
export * from './browse-version.ts';
export * from './verify-version.ts';
export { subtreeIndex } from './subtree-index.ts';
export { unavailableBlockReason, type UnavailableBlock } from './receive-blocks.ts';
export * from './version-path.ts';
export * from './version-diff.ts';
export * from './change-counts.ts';
export * from './item-look.ts';
export * from './restore-plan.ts';
export { timesInTree } from './times-in-tree.ts';
