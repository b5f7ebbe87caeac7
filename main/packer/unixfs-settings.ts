import { balanced } from 'ipfs-unixfs-importer/layout';
import { fixedSize } from 'ipfs-unixfs-importer/chunker';
import type { ImporterOptions } from 'ipfs-unixfs-importer';

// The importer settings of §17.1, spelled out rather than taken from a profile, so a change
// of library defaults can never change our CIDs.
export const CHUNK_BYTES = 1_048_576;

export function unixfsImporterOptions(): ImporterOptions {
  return {
    cidVersion: 1,
    rawLeaves: true,
    reduceSingleLeafToSelf: false,
    chunker: fixedSize({ chunkSize: CHUNK_BYTES }),
    layout: balanced({ maxChildrenPerNode: 1024 }),
    shardSplitThresholdBytes: 256 * 1024,
    shardSplitStrategy: 'block-bytes',
    shardFanoutBits: 8,
    wrapWithDirectory: false,
    fileImportConcurrency: 4,
  };
}
