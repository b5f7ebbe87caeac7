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
//
// A relative path typed at a command line (`canopy restore 2019/beach.jpg` in ~/Pictures, or
// `beach.jpg` in ~/Pictures/2019) names what it names there, as the shell completed it, when it
// lies in the version's folder (or the bucket's now) from the folder it was typed in; any other
// is taken from the version's top, as before.

/** A path asked for, and the folder it was typed in when it is relative to that. */
export interface TypedPath {
  /** As restore/version-path.ts takes it; undefined for the whole version. */
  readonly path?: string;
  /**
   * The folder a relative `path` was typed in (a command line's working folder); without it,
   * a relative path goes from the version's top.
   */
  readonly typedIn?: string;
}

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
    private readonly typedIn?: string,
  ) {}

  /** For a request that names the version it reads (or the bucket's active one) and a path. */
  static of(browser: VersionBrowser, input: VersionRequest & TypedPath): PathsInVersions {
    const named = input.version !== undefined || input.snapshot !== undefined;
    return new PathsInVersions(browser, input.bucket, input.path, named, input.typedIn);
  }

  /** The path asked for, in the version whose folder is `ownLabel` (its `source_label`). */
  async in(ownLabel: unknown): Promise<PathInVersion> {
    const { given } = this;
    const asGiven = { path: given, sourceLabel: ownLabel };
    if (given === undefined) return asGiven;
    if (!path.isAbsolute(given)) {
      if (this.typedIn === undefined) return asGiven;
      // Where it lies from the folder it was typed in, from that folder's top when that is in
      // the version's folder (or the bucket's now); from the version's top otherwise.
      const there = path.resolve(this.typedIn, given);
      const inOwn = pathInSource(there, ownLabel, this.browser.computer());
      if (inOwn !== undefined) return { path: inOwn, sourceLabel: ownLabel };
      return (this.named ? await this.inFolderNow(there, ownLabel) : undefined) ?? asGiven;
    }
    if (!this.named || pathInSource(given, ownLabel, this.browser.computer()) !== undefined)
      return asGiven;
    return (await this.inFolderNow(given, ownLabel)) ?? asGiven;
  }

  /** The absolute path `there` from the top of the bucket's folder now, when it lies in it. */
  private async inFolderNow(there: string, ownLabel: unknown): Promise<PathInVersion | undefined> {
    const labelNow = await this.bucketsFolderNow();
    const inFolderNow =
      labelNow === ownLabel ? undefined : pathInSource(there, labelNow, this.browser.computer());
    return inFolderNow === undefined ? undefined : { path: inFolderNow, sourceLabel: labelNow };
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
