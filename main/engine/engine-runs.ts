import type { EngineParts } from './engine-parts.ts';
import { ItemHistoryReader } from './item-history.ts';
import { SourceBackup } from './source-backup.ts';
import { VersionBrowser } from './version-browser.ts';
import { VersionComparison } from './version-comparison.ts';
import { VersionRestorer } from './version-restorer.ts';
import { VersionVerifier } from './version-verifier.ts';

// The engine's runs over a version's data: backing up, browsing, comparing, an item's history,
// verifying and restoring. They bring the UnixFS importer and exporter and the packer, restore
// and uploader with them (about 0.2 s of a command's start), which the engine loads only once a
// request needs one: listing buckets or versions, or the account, goes without.

export interface EngineRuns {
  readonly backups: SourceBackup;
  readonly browser: VersionBrowser;
  readonly comparison: VersionComparison;
  readonly history: ItemHistoryReader;
  readonly verifier: VersionVerifier;
  readonly restorer: VersionRestorer;
}

export function engineRuns(parts: EngineParts): EngineRuns {
  const verifier = new VersionVerifier(parts);
  const browser = new VersionBrowser(parts);
  return {
    backups: new SourceBackup(parts, verifier),
    browser,
    comparison: new VersionComparison(parts, browser),
    history: new ItemHistoryReader(parts, browser),
    verifier,
    restorer: new VersionRestorer(parts, browser),
  };
}
