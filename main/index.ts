// The engine: plain Node, never imports electron, app/ or renderer/. Hosts reach it through
// createEngine(deps) and the types in main/api.
import { Engine } from './engine/engine.ts';
import type { EngineDeps } from './engine/engine-deps.ts';
import { withHomeErrors } from './engine/home-errors.ts';

export { localDatabaseDamaged } from './engine/home-errors.ts';

export type { DeletedVersion, KeptVersion, VersionsOrLastSeen } from './engine/bucket-versions.ts';
export { RETENTION_RULES, policyOptions } from './engine/retention-policy.ts';
export type { PruneRequest, PrunedVersions } from './engine/version-retention.ts';
export type {
  KeptBecause,
  RetentionPolicy,
  RetentionRule,
  RetentionSpan,
} from './engine/retention-policy.ts';
export type { VersionAsOf } from './engine/version-as-of.ts';
export type { AccountSummary, LinkWaiting } from './engine/enrollment.ts';
export type { EngineDeps, LocalService } from './engine/engine-deps.ts';
export type { SourceExcludeRules } from './engine/source-exclude-rules.ts';
export type { ExcludedItem } from './engine/excluded-items.ts';
export { CACHE_TAG_NAME, IGNORE_FILE, ruleIncludingAgain } from './scanner/index.ts';
export type { BackupRequest, BackupRetention, StoredBackup } from './engine/source-backup.ts';
export type { BackupPlan, PlanRequest } from './engine/backup-plan.ts';
export type { BrowseRequest, BrowsedFolder } from './engine/version-browser.ts';
export type {
  ChangeCounts,
  ItemChangeKind,
  RestoredAs,
  VersionChange,
  VersionChangeKind,
  VersionEntry,
} from './restore/index.ts';
export type {
  ChangeListener,
  CompareRequest,
  ComparedVersion,
  ComparedVersions,
  VersionsCompared,
} from './engine/version-comparison.ts';
export type {
  HistoryProgress,
  HistoryRequest,
  ItemHistory,
  ItemVersion,
} from './engine/item-history.ts';
export type { VerifiedVersion, VerifyRequest } from './engine/version-verifier.ts';
export type { PlannedRestore, RestoreRequest, RestoredVersion } from './engine/version-restorer.ts';
export type {
  BackupProgress,
  BackupResult,
  RestoreProgress,
  VerifyProgress,
} from './uploader/index.ts';
export type { ServiceWait } from './service/index.ts';
export type { Engine };

export function createEngine(deps: EngineDeps): Engine {
  return withHomeErrors(() => new Engine(deps), deps.home);
}
