import { readFileSync, realpathSync, statfsSync } from 'node:fs';

// File systems that hold no one's files: the kernel's views of processes, devices and settings
// (/proc, /sys, /sys/fs/cgroup, the device nodes of /dev, ...), and autofs, whose folders (/net)
// mount network shares when walked into. A backup of `/`, or of a folder with one mounted
// inside, would otherwise read tens of thousands of entries that change as they are read (and
// /proc/kcore, the size of the machine's address space), and restore them nowhere they could
// go. A walk passes over each where it is mounted, as `tar --one-file-system` would, but only
// these.

/** statfs(2) magic numbers of the kernel's own file systems (linux/magic.h), with their names. */
const KERNEL_FILE_SYSTEMS: ReadonlyMap<number, string> = new Map([
  [0x9fa0, 'proc'],
  [0x62656572, 'sysfs'],
  [0x27e0eb, 'cgroup'],
  [0x63677270, 'cgroup2'],
  [0x64626720, 'debugfs'],
  [0x74726163, 'tracefs'],
  [0x73636673, 'securityfs'],
  [0x6165676c, 'pstore'],
  [0xcafe4a11, 'bpf'],
  [0x62656570, 'configfs'],
  [0x65735543, 'fusectl'],
  [0x19800202, 'mqueue'],
  [0x1cd1, 'devpts'],
  [0x42494e4d, 'binfmt_misc'],
  [0xde5e81e4, 'efivarfs'],
  [0x6e736673, 'nsfs'],
  [0xf97cff8c, 'selinuxfs'],
  [0x43415d53, 'smackfs'],
  [0x0187, 'autofs'],
]);

/** statfs(2)'s magic number of tmpfs, which devtmpfs shares. */
const TMPFS_MAGIC = 0x01021994;

/**
 * The name of the kernel file system mounted at `folder`, or undefined for one that holds
 * files (any disk's, a network share's, tmpfs).
 */
export function kernelFileSystemAt(folder: string): string | undefined {
  const type = statfsSync(folder).type;
  // devtmpfs (/dev: the kernel's device nodes, made anew at each boot) has tmpfs's magic
  // number, and tmpfs holds people's files (/tmp, /dev/shm): only the mount table tells them
  // apart.
  if (type === TMPFS_MAGIC) return mountedTypeAt(folder) === 'devtmpfs' ? 'devtmpfs' : undefined;
  return KERNEL_FILE_SYSTEMS.get(type);
}

/**
 * The type of the file system `folder` lies in, as this process's mount table
 * (/proc/self/mountinfo) lists the deepest mount above it or at it; undefined where there is
 * no such table (not Linux, /proc not mounted).
 */
function mountedTypeAt(folder: string): string | undefined {
  let table: string;
  try {
    table = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    // No table to read: taken for tmpfs, as statfs says, and walked as files.
    return undefined;
  }
  const at = realpathSync(folder);
  let deepest: { point: string; type: string } | undefined;
  for (const line of table.split('\n')) {
    // "id parent major:minor root mount-point options [optional...] - type source options"
    const fields = line.split(' ');
    const separator = fields.indexOf('-', 6);
    const point = fields[4];
    const type = fields[separator + 1];
    if (separator < 0 || point === undefined || type === undefined) continue;
    const mountPoint = unescapeMountPath(point);
    const inside = at === mountPoint || at.startsWith(mountPoint === '/' ? '/' : `${mountPoint}/`);
    // A later line for the same point is a mount over the earlier one.
    if (inside && (!deepest || mountPoint.length >= deepest.point.length))
      deepest = { point: mountPoint, type };
  }
  return deepest?.type;
}

/** A mount table's path, whose space, tab, newline and backslash are written as octal escapes. */
function unescapeMountPath(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, octal: string) =>
    String.fromCharCode(parseInt(octal, 8)),
  );
}
