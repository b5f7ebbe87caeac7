import { mkdirSync, readdirSync, renameSync, rmSync, unlinkSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { AlignedSlots } from '../../main/direct-io/index.ts';
import type { BlockLocation } from '../store/stored-blocks.ts';
import { BlockReader } from './block-reader.ts';
import { fsyncPath } from './fsync-path.ts';
import { MetadataChunkFiles } from './metadata-chunk-files.ts';
import { PackWriter } from './pack-writer.ts';
import { ownFileId } from './own-file-names.ts';

// The content-addressed block store on disk. A shard's new blocks are written as one pack
// file: staged, fdatasynced, then renamed into `packs/` with one fsync of that folder, so a
// reader never sees a partial pack. The database says where each block is (pack and offset);
// blocks written by earlier servers as files of their own, under `blocks/`, stay readable.
// A pack is immutable; garbage collection deletes empty packs and rewrites mostly dead ones.
//
// A pack no row names any more is not deleted at once but moved to `retired-packs/`, and
// deleted once a copy of the database that no longer names it is kept
// (store/kept-database-copy.ts): the copy kept before may still name it, and should it be put
// back in place of a damaged database, its blocks must be where it says.

/** Where packs no row names wait for the next kept copy of the database (see above). */
export const RETIRED_PACKS_DIR = 'retired-packs';

/**
 * Packs written at once with O_DIRECT, each from a 1 MiB aligned slot (pack-writer.ts). A
 * client uploads two shards at once; packs beyond this many go through the page cache.
 */
const DIRECT_PACKS = 8;

export class BlockStore {
  private readonly blocksDir: string;
  private readonly packsDir: string;
  private readonly stagingDir: string;
  private readonly metadataDir: string;
  private readonly retiredDir: string;
  /** Readers open now; packs retired meanwhile are moved away when the last one closes. */
  private openReaders = 0;
  private readonly retired = new Set<string>();
  /** Metadata CARs, as chunks each stored once. */
  readonly metadataChunks: MetadataChunkFiles;
  /** Made with the first pack: most runs of the embedded service (a restore, a browse) write none. */
  private packSlots: AlignedSlots | undefined | null = null;

  /** `readOnly`: only read from it (its disk is mounted read-only); its folders are not made. */
  constructor(dataDir: string, options: { readonly readOnly?: boolean } = {}) {
    this.blocksDir = path.join(dataDir, 'blocks');
    this.packsDir = path.join(dataDir, 'packs');
    this.stagingDir = path.join(dataDir, 'staging');
    this.metadataDir = path.join(dataDir, 'metadata');
    this.retiredDir = path.join(dataDir, RETIRED_PACKS_DIR);
    this.metadataChunks = new MetadataChunkFiles(
      path.join(this.metadataDir, 'chunks'),
      this.stagingDir,
      this.retiredDir,
      options.readOnly === true,
    );
    if (options.readOnly) return;
    for (const dir of [
      this.blocksDir,
      this.packsDir,
      this.stagingDir,
      this.metadataDir,
      this.retiredDir,
    ])
      mkdirSync(dir, { recursive: true });
  }

  /**
   * Clears what a crash can leave: staged files, and packs renamed into place whose rows were
   * never committed. Only a server that no other process serves alongside may call this,
   * before it accepts uploads (ServingLock): another's upload could be staging a pack, or
   * be between a pack's rename and its commit.
   */
  recover(knownPacks: ReadonlySet<string>): { staged: number; orphanPacks: number } {
    const staged = readdirSync(this.stagingDir).length;
    rmSync(this.stagingDir, { recursive: true, force: true });
    mkdirSync(this.stagingDir, { recursive: true });
    let orphanPacks = 0;
    for (const name of readdirSync(this.packsDir)) {
      // Files of other names are not the service's to remove (own-file-names.ts).
      const id = ownFileId(name, '.pack');
      if (id === undefined || knownPacks.has(id)) continue;
      rmSync(path.join(this.packsDir, name), { force: true });
      orphanPacks += 1;
    }
    return { staged, orphanPacks };
  }

  /** Path of a block stored as its own file; CIDs are validated base32, so they cannot escape. */
  legacyBlockPath(cid: string): string {
    return path.join(this.blocksDir, cid.slice(-4, -2), cid);
  }

  /** Path of a pack; pack ids are UUIDs the server made. */
  packPath(id: string): string {
    return path.join(this.packsDir, `${id}.pack`);
  }

  /** Where a pack waits once retired (retirePack), until a copy of the database lets it go. */
  retiredPackPath(id: string): string {
    return path.join(this.retiredDir, `${id}.pack`);
  }

  /** Where a block's bytes start on disk. */
  fileOf(location: BlockLocation): { file: string; offset: number } {
    return location.pack === null
      ? { file: this.legacyBlockPath(location.cid), offset: 0 }
      : { file: this.packPath(location.pack), offset: location.offset };
  }

  /** A metadata CAR stored whole, by a server before chunks (metadata-chunk-files.ts). */
  metadataPath(versionId: string): string {
    return path.join(this.metadataDir, `${versionId}.car`);
  }

  /** A fresh staging file name for a metadata CAR. */
  stagingPath(): string {
    return path.join(this.stagingDir, `${randomUUID()}.car`);
  }

  /** A new pack in the staging folder; append blocks, finish it, then commit or discard it. */
  startPack(): Promise<PackWriter> {
    if (this.packSlots === null) this.packSlots = AlignedSlots.tryCreate(DIRECT_PACKS);
    return PackWriter.create(this.stagingDir, this.packSlots);
  }

  /**
   * Moves a finished pack into place and makes the rename durable. Synchronous, to run inside
   * the transaction that records its blocks: a crash before the commit leaves a pack no row
   * names, which `recover` removes; a crash after it finds the pack in place.
   */
  commitPack(pack: PackWriter): void {
    renameSync(pack.file, this.packPath(pack.id));
    fsyncPath(this.packsDir);
  }

  /** Removes a committed pack whose rows did not commit after all. */
  removeUncommittedPack(id: string): void {
    rmSync(this.packPath(id), { force: true });
  }

  /**
   * Moves a pack no row names any more to the retired packs, once no reader can still be
   * reading it.
   */
  retirePack(id: string): void {
    if (this.openReaders === 0) this.moveToRetired(id);
    else this.retired.add(id);
  }

  /** The retired packs' file names now: those a copy of the database made from now lets go. */
  retiredPacks(): string[] {
    return readdirSync(this.retiredDir);
  }

  /** Deletes the retired packs `names` (from retiredPacks). */
  dropRetired(names: readonly string[]): void {
    for (const name of names) rmSync(path.join(this.retiredDir, name), { force: true });
  }

  private moveToRetired(id: string): void {
    try {
      renameSync(this.packPath(id), this.retiredPackPath(id));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }

  removeLegacyBlock(cid: string): void {
    try {
      unlinkSync(this.legacyBlockPath(cid));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }

  discard(staged: string): void {
    rmSync(staged, { force: true });
  }

  removeMetadata(versionId: string): void {
    rmSync(this.metadataPath(versionId), { force: true });
  }

  /**
   * A reader for a run of block reads (one blocks/car answer). It keeps each pack it reads
   * open until closed, and while any reader is open, retired packs stay on disk: an answer
   * looked its blocks up before it started, and a compaction may have moved them since.
   */
  openReader(): BlockReader {
    this.openReaders += 1;
    return new BlockReader(this, () => {
      this.openReaders -= 1;
      if (this.openReaders > 0) return;
      for (const id of this.retired) this.moveToRetired(id);
      this.retired.clear();
    });
  }
}
