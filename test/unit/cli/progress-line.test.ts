import { describe, expect, it } from 'vitest';
import { formatBytes } from '../../../main/api/index.ts';
import {
  formatEta,
  HISTORY_PROGRESS,
  PHASE_PROGRESS,
  progressLine,
  verifyProgressLine,
  withLimitShown,
} from '../../../cli/progress-line.ts';

describe('the progress line', () => {
  it('says sizes in decimal units and times the way people round them', () => {
    expect([0, 999, 1500, 12_582_912, 3_400_000_000].map(formatBytes)).toEqual([
      '0 B',
      '999 B',
      '1.5 kB',
      '13 MB',
      '3.4 GB',
    ]);
    expect([null, 0.2, 42, 600, 7_380].map(formatEta)).toEqual([
      'estimating time left',
      'almost done',
      'about 42 s left',
      'about 10 min left',
      'about 2 h 3 min left',
    ]);
  });

  it('says the limit a transfer keeps to, in the phases that send or receive', () => {
    const counts = { filesDone: 1, filesTotal: 3, bytesDone: 0, bytesTotal: 10, etaSeconds: 5 };
    const limited = withLimitShown(PHASE_PROGRESS, ['pushing', 'uploading'], 2_000_000);
    expect(limited.line({ phase: 'uploading', ...counts })).toBe(
      'uploading: 1/3 files, 0 B of 10 B, about 5 s left, at most 2.0 MB/s',
    );
    expect(limited.line({ phase: 'reading', ...counts })).toBe(
      'reading: 1/3 files, 0 B of 10 B, about 5 s left',
    );
    expect(withLimitShown(PHASE_PROGRESS, ['uploading'], undefined)).toBe(PHASE_PROGRESS);
  });

  it('shows the phase, files, bytes and the ETA', () => {
    expect(
      progressLine({
        phase: 'uploading',
        filesDone: 10,
        filesTotal: 10,
        bytesDone: 250_000_000,
        bytesTotal: 1_000_000_000,
        etaSeconds: 95,
      }),
    ).toBe('uploading: 10/10 files, 250 MB of 1.0 GB, about 2 min left');
    // Every file is read by the push: the bytes going are the list of them.
    expect(
      progressLine({
        phase: 'pushing',
        filesDone: 100_000,
        filesTotal: 100_000,
        bytesDone: 3_200_000,
        bytesTotal: 15_800_000,
        etaSeconds: 40,
      }),
    ).toBe('sending the list of files: 3.2 MB of 16 MB, about 40 s left');
    expect(
      progressLine({
        phase: 'pulling',
        filesDone: 0,
        filesTotal: 0,
        bytesDone: 700_000,
        bytesTotal: 15_800_000,
        etaSeconds: null,
      }),
    ).toBe('fetching the list of files: 700 kB of 16 MB, estimating time left');
    // Shards read again, not the user's files: no file is counted.
    expect(
      progressLine({
        phase: 'trimming',
        filesDone: 1,
        filesTotal: 4,
        bytesDone: 64_000_000,
        bytesTotal: 256_000_000,
        etaSeconds: 3,
      }),
    ).toBe(
      'leaving out what the server holds already, reading the rest again: 64 MB of 256 MB, about 3 s left',
    );
    // A restore going on with the large files a stopped one part-wrote reads them back first.
    expect(
      progressLine({
        phase: 'checking',
        filesDone: 1,
        filesTotal: 2,
        bytesDone: 3_000_000_000,
        bytesTotal: 41_000_000_000,
        etaSeconds: 40,
      }),
    ).toBe(
      'reading back what a stopped restore part-wrote: 1/2 files, 3.0 GB of 41 GB, about 40 s left',
    );
    expect(
      progressLine({
        phase: 'opening',
        filesDone: 0,
        filesTotal: 0,
        bytesDone: 20_000_000,
        bytesTotal: 49_000_000,
        etaSeconds: 1.2,
      }),
    ).toBe('reading the list of files: 20 MB of 49 MB, about 1 s left');
    // A listing goes through entries, and reads no bytes.
    expect(
      progressLine({
        phase: 'listing',
        filesDone: 120_000,
        filesTotal: 300_300,
        bytesDone: 0,
        bytesTotal: 0,
        etaSeconds: 4,
      }),
    ).toBe('listing: 120000/300300 entries, about 4 s left');
    // A scan knows no total until it ends: what it found so far, and no time left.
    expect(
      progressLine({
        phase: 'scanning',
        filesDone: 41_000,
        filesTotal: 41_000,
        bytesDone: 3_400_000_000,
        bytesTotal: 3_400_000_000,
        etaSeconds: null,
      }),
    ).toBe('scanning: 41000 files, 3.4 GB found');
    expect(
      progressLine({
        phase: 'scanning',
        filesDone: 1,
        filesTotal: 1,
        bytesDone: 7,
        bytesTotal: 7,
        etaSeconds: null,
      }),
    ).toBe('scanning: 1 file, 7 B found');
    expect(
      progressLine({
        phase: 'restoring',
        filesDone: 3,
        filesTotal: 7,
        bytesDone: 5_000_000,
        bytesTotal: 9_000_000,
        etaSeconds: 9000,
      }),
    ).toBe('restoring: 3/7 files, 5.0 MB of 9.0 MB, about 2 h 30 min left');
    expect(
      verifyProgressLine({
        phase: 'verifying',
        blocksDone: 1024,
        blocksTotal: 400_000,
        bytesDone: 12_000,
        bytesTotal: 4_700_000,
        etaSeconds: null,
      }),
    ).toBe('verifying: 1024/400000 blocks, 12 kB of 4.7 MB, estimating time left');
    // A verify fetches the version's list of files afresh first.
    expect(
      verifyProgressLine({
        phase: 'pulling',
        blocksDone: 0,
        blocksTotal: 0,
        bytesDone: 4_000_000,
        bytesTotal: 60_000_000,
        etaSeconds: 30,
      }),
    ).toBe('fetching the list of files: 4.0 MB of 60 MB, about 30 s left');
    // Then reads and checks it.
    expect(
      verifyProgressLine({
        phase: 'opening',
        blocksDone: 0,
        blocksTotal: 0,
        bytesDone: 60_000_000,
        bytesTotal: 60_000_000,
        etaSeconds: 0,
      }),
    ).toBe('reading the list of files: 60 MB of 60 MB, almost done');
  });

  it("shows a history's versions read, and the fetch of the next one's list of files", () => {
    const pulling = {
      phase: 'pulling' as const,
      filesDone: 0,
      filesTotal: 0,
      bytesDone: 4_000_000,
      bytesTotal: 16_000_000,
      etaSeconds: 3,
    };
    expect(HISTORY_PROGRESS.line({ versionsDone: 2, versionsTotal: 40, pulling: null })).toBe(
      'reading versions: 2/40',
    );
    expect(HISTORY_PROGRESS.line({ versionsDone: 2, versionsTotal: 40, pulling })).toBe(
      'reading versions: 2/40, fetching the list of files: 4.0 MB of 16 MB, about 3 s left',
    );
    expect(HISTORY_PROGRESS.ended({ versionsDone: 39, versionsTotal: 40, pulling: null })).toBe(
      false,
    );
    expect(HISTORY_PROGRESS.ended({ versionsDone: 40, versionsTotal: 40, pulling: null })).toBe(
      true,
    );
  });
});
