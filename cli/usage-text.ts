import { TAKEN } from './command-options.ts';

// What `canopy --help` prints. Each command's options here are those command-options.ts says it
// takes (test/unit/cli/usage-text.test.ts holds the two together).

export const USAGE = `usage: canopy <command> [options]   (every command takes --json)

  login --server URL --code CODE [--name DEVICE]   enroll this device with a server
  login --local [--data DIR] [--name DEVICE]        back up to this computer or a disk
  link --server URL [--name DEVICE]                 wait until another device approves this one
  whoami | logout
  devices [list | approve PEMFILE [--name N] | revoke ID [--yes] | code]
                                                    revoking this device asks first; --yes
                                                    does not ask
  buckets [list | create NAME --type backup|interactive --class hot|warm|cold
           | rename NAME NEWNAME | delete NAME [--yes]]
                                                    delete asks for the bucket's name when it
                                                    holds versions; --yes does not ask
  backup DIR --bucket NAME [--dry-run] [--progress] [--allow-empty] [--replace-source] [--skip-check]
         [--limit-upload RATE]
  excludes DIR [--add RULE]... [--remove RULE]... [--clear]
                                                    the folder's exclude rules (gitignore lines)
  versions --bucket NAME | snapshots --bucket NAME
  versions delete ID... --bucket NAME               delete versions (and their snapshots), freeing
                                                    their data no other version holds
  versions prune --bucket NAME [--keep-last N] [--keep-hourly N] [--keep-daily N]
                 [--keep-weekly N] [--keep-monthly N] [--keep-yearly N] [--keep-within SPAN]
                 [--dry-run]                        delete the versions no rule keeps: --keep-last
                                                    keeps the newest N, --keep-daily the newest of
                                                    each of the last N days that have one, and so
                                                    on; --keep-within 14d (h, d, w, m, y) all made
                                                    in the 14 days before the newest; the latest
                                                    always stays
  versions policy --bucket NAME [prune's keep rules | --clear]
                                                    the policy every backup to the bucket from
                                                    here applies once stored (prune given no
                                                    rule applies it too)
  snapshots create [ID] --bucket NAME               pin a version (the active one by default): the
                                                    server keeps it until its snapshot is deleted
  snapshots delete ID --bucket NAME                 unpin a version; the version stays
  ls --bucket NAME [--version ID | --snapshot ID | --at TIME] [PATH] [--recursive|-R]
     [--progress]
                                                    -R: all below PATH, each by its path
  restore --bucket NAME [--version ID | --snapshot ID | --at TIME] [PATH] [--to DIR] [--overwrite]
          [--sparse] [--dry-run] [--progress]       without --to, to where it was backed up from;
          [--limit-download RATE]                   --sparse leaves runs of zeros as holes;
                                                    --dry-run tells what it would do, and does not
  diff --bucket NAME [--from ID] [--to ID] [PATH] [--progress]
                                                    what changed between two versions: by default
                                                    from the one before the active one to it
  history PATH --bucket NAME [--progress]           the versions in which PATH differs from the
                                                    version before, newest first
  verify --bucket NAME [--version ID | --snapshot ID | --at TIME] [--all] [--progress]
         [--limit-download RATE]
  account [show | set [--display-name NAME] [--locale TAG]]
  invoices
  notifications [list | dismiss ID]

a version's or snapshot's ID may be its first characters (4 or more) when no other's begin so;
--at TIME takes the newest version made by then: a day (2026-11-20, until its end) or a time
(2026-11-20T14:30, this computer's clock unless it ends in Z or +01:00)
a PATH in a version goes from the folder backed up (2019/beach.jpg), or is its path there
(~/Pictures/2019/beach.jpg, or beach.jpg typed in ~/Pictures/2019), or in the bucket's folder
now, for one renamed since
RATE (--limit-upload, --limit-download) is bytes a second (2MB, 1.5MiB) or bits (10Mbit)
canopy --version alone prints Canopy's own version
exit status: 0 done, 1 failed, 2 usage; backup 3: stored, but without items it could not read, or
blocks of the bucket did not come back whole
with --json, a failure is one JSON line on stderr: {"error":{"code","message","retryable"}}
environment: CANOPY_HOME (default: the per-user data folder), CANOPY_SECRET_STORE=keychain|file`;

/**
 * The lines of USAGE that show command `name`, as --help prints them: each line it starts (at
 * the line's start, or after a bar between two commands: `whoami | logout`) and the lines that
 * go on from one it starts first. None for a word that names no command.
 */
export function usageLinesOf(name: string): string[] {
  // The commands are the second paragraph: one per line two spaces in, continued further in.
  const [, commands = ''] = USAGE.split('\n\n');
  const shown: string[] = [];
  let continued = false;
  for (const line of commands.split('\n')) {
    if (/^ {2}\S/.test(line)) {
      const words = line.trim().split(/\s+/);
      const started = words.filter(
        (word, index) => TAKEN.has(word) && (index === 0 || words[index - 1] === '|'),
      );
      continued = started[0] === name;
      if (started.includes(name)) shown.push(line);
    } else if (continued) shown.push(line);
  }
  return shown;
}

/** What `canopy NAME --help` prints: the lines of command `name`; all of USAGE for no command. */
export function helpOf(name: string | undefined): string {
  const lines = name === undefined ? [] : usageLinesOf(name);
  if (lines.length === 0) return USAGE;
  const [header = '', , ...notes] = USAGE.split('\n\n');
  return [header, lines.join('\n'), ...notes].join('\n\n');
}
