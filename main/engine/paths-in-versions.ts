import path from 'node:path';
import { EngineError } from '../api/index.ts';
import { pathInSource } from '../restore/index.ts';
import type { VersionBrowser, VersionRequest } from './version-browser.ts';

// A path a user gives `canopy ls`, `restore` or `diff` for a version they name, when it is a
// path on disk now. A bucket's folder may have been renamed or moved since an older version
// (--replace-source): /home/ann/Documents/report.txt is then report.txt in the versions of
// /home/ann/Docs too, as `canopy history` reads it, and as its hint to restore a copy of one
// of those versions gives it. A path inside the version's own folder is taken from that folder
// (restore/version-path.ts); one outside it but inside the folder the bucket backs up now (its
// active version's), from that one; any other, from the version's top.

/** A path in a version, and the label of the folder it was taken from. */
export interface PathInVersion {
  /** As restore/version-path.ts takes it; undefined for the whole version. */
  readonly path: string | undefined;
  /** The `source_label` of the folder an absolute path lies in; the version's own otherwise. */
  readonly sourceLabel: unknown;
}

export class PathsInVersions {
  /** The bucket's folder now, once read. */
  private folderNow: Promise<unknown> | undefined;

  /**
   * For `given`, a path asked for in versions of `bucket` read through `browser`. Unless
   * `named` (a version or a snapshot the user named), the version is the bucket's active one,
   * whose folder is the bucket's folder now.
   */
  constructor(
    private readonly browser: VersionBrowser,
    private readonly bucket: string,
    private readonly given: string | undefined,
    private readonly named: boolean,
  ) {}

  /** For a request that names the version it reads (or the bucket's active one) and a path. */
  static of(
    browser: VersionBrowser,
    input: VersionRequest & { readonly path?: string },
  ): PathsInVersions {
    const named = input.version !== undefined || input.snapshot !== undefined;
    return new PathsInVersions(browser, input.bucket, input.path, named);
  }

  /** The path asked for, in the version whose folder is `ownLabel` (its `source_label`). */
  async in(ownLabel: unknown): Promise<PathInVersion> {
    const { given } = this;
    const asGiven = { path: given, sourceLabel: ownLabel };
    if (given === undefined || !this.named || !path.isAbsolute(given)) return asGiven;
    if (pathInSource(given, ownLabel) !== undefined) return asGiven;
    const labelNow = await this.bucketsFolderNow();
    const inFolderNow = labelNow === ownLabel ? undefined : pathInSource(given, labelNow);
    return inFolderNow === undefined ? asGiven : { path: inFolderNow, sourceLabel: labelNow };
  }

  private bucketsFolderNow(): Promise<unknown> {
    this.folderNow ??= this.browser
      .reading({ bucket: this.bucket }, (tree) => tree.manifest['source_label'])
      .then(
        ({ value }) => value,
        (error: unknown) => {
          // No folder now to read the path in (a bucket whose active version this computer
          // cannot read, offline and not kept here): it is taken from the version's top, and
          // what is not there is reported as not found, with where to look.
          if (error instanceof EngineError) return undefined;
          throw error;
        },
      );
    return this.folderNow;
  }
}
