import { statfsSync } from 'node:fs';

// File systems that hold no one's files: the kernel's views of processes, devices and settings
// (/proc, /sys, /sys/fs/cgroup, ...), and autofs, whose folders (/net) mount network shares when
// walked into. A backup of `/`, or of a folder with one mounted inside, would otherwise read tens
// of thousands of entries that change as they are read (and /proc/kcore, the size of the
// machine's address space), and restore them nowhere they could go. A walk passes over each
// where it is mounted, as `tar --one-file-system` would, but only these.

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

/**
 * The name of the kernel file system mounted at `folder`, or undefined for one that holds
 * files (any disk's, a network share's, tmpfs).
 */
export function kernelFileSystemAt(folder: string): string | undefined {
  return KERNEL_FILE_SYSTEMS.get(statfsSync(folder).type);
}
