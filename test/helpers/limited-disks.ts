import { spawnSync } from 'node:child_process';
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';

// Disks that cannot hold everything a Linux folder holds, for restores onto them. This kernel
// has no FAT or exFAT module, so both are FUSE file systems from Debian's packages:
// - an exFAT disk, as on a USB stick: an image formatted by mkfs.exfat (exfatprogs) on a loop
//   device, mounted by exfat-fuse. Like the real thing it refuses names holding : ? * " < > |
//   or \, cannot hold symbolic links, and compares names without regard to case;
// - a folder seen through bindfs --chmod-deny, which refuses every chmod with EPERM, as the
//   kernel's FAT and exFAT drivers refuse any mode but the one their mount options give;
// - the kernel's own memory disks: a small tmpfs fills up as a nearly full drive does, and
//   ramfs refuses O_DIRECT (tmpfs takes it from Linux 6.6).
// - a small ext4 disk (an image formatted by mkfs.ext4, loop-mounted): a full drive on the file
//   system a restore flushes whole rather than file by file (file-system-flush.ts).

export interface MountedDisk {
  /** Where the disk is mounted. */
  readonly dir: string;
  unmount(): void;
}

export interface ExfatDisk extends MountedDisk {
  /** Unmounts and mounts it again, as unplugging and plugging in a USB stick does. */
  remount(): void;
  /** Unmounts it, leaving its mount point as an unplugged disk leaves it. */
  unplug(): void;
  /**
   * Mounts it again after `unplug`, read-only if asked (as a system mounts a disk that was
   * pulled out unsafely); fails, as mount does, where its mount point is not empty.
   */
  plugIn(options?: { readOnly?: boolean }): void;
  /**
   * Ends its FUSE driver, as pulling the stick out while mounted does: the mount stays, and
   * every call on it fails with ENOTCONN, until `plugIn` lifts it and mounts the disk again.
   */
  pullOut(): void;
}

function run(command: string, args: readonly string[]): string {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  if (result.status !== 0)
    throw new Error(
      `${command} ${args.join(' ')} failed: ${result.error?.message ?? result.stderr}`,
    );
  return result.stdout.trim();
}

/** Kills the process whose command line starts with `words`. */
function killCommand(words: readonly string[]): void {
  const wanted = words.join('\0') + '\0';
  const pid = readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .find((entry) => {
      try {
        return readFileSync(`/proc/${entry}/cmdline`, 'utf8').startsWith(wanted);
      } catch {
        // Gone meanwhile, or not ours to read.
        return false;
      }
    });
  if (pid === undefined) throw new Error(`no process runs ${words.join(' ')}`);
  process.kill(Number(pid), 'SIGKILL');
}

/** Whether the FUSE mount at `dir` has lost its driver: every call on it fails with ENOTCONN. */
function isDeadMount(dir: string): boolean {
  try {
    statSync(dir);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOTCONN';
  }
}

/** Makes and mounts an exFAT disk of `sizeMiB` at `dir` (made here); its image sits beside it. */
export function mountExfat(dir: string, sizeMiB: number): ExfatDisk {
  const image = `${dir}.img`;
  writeFileSync(image, '');
  truncateSync(image, sizeMiB * 1024 * 1024);
  run('mkfs.exfat', [image]);
  mkdirSync(dir, { recursive: true });
  const device = run('losetup', ['--find', '--show', image]);
  try {
    run('mount.exfat-fuse', [device, dir]);
  } catch (error) {
    run('losetup', ['--detach', device]);
    throw error;
  }
  let mounted = true;
  /** Its driver was ended under the mount (`pullOut`): the mount must be lifted lazily. */
  let dead = false;
  const liftDeadMount = (): void => {
    if (dead) run('umount', ['--lazy', dir]);
    dead = false;
  };
  const disk: ExfatDisk = {
    dir,
    unmount() {
      liftDeadMount();
      if (mounted) run('umount', [dir]);
      mounted = false;
      run('losetup', ['--detach', device]);
      rmSync(image, { force: true });
    },
    remount() {
      disk.unplug();
      disk.plugIn();
    },
    unplug() {
      run('umount', [dir]);
      mounted = false;
    },
    pullOut() {
      killCommand(['mount.exfat-fuse', device, dir]);
      const deadline = Date.now() + 5000;
      while (!isDeadMount(dir)) {
        if (Date.now() > deadline) throw new Error(`the mount at ${dir} outlived its driver`);
        spawnSync('sleep', ['0.05']);
      }
      mounted = false;
      dead = true;
    },
    plugIn(options = {}) {
      liftDeadMount();
      run('mount.exfat-fuse', [...(options.readOnly === true ? ['-o', 'ro'] : []), device, dir]);
      mounted = true;
    },
  };
  return disk;
}

/** Mounts at `dir` (made here) a view of a fresh folder beside it in which no chmod succeeds. */
export function mountRefusingModes(dir: string): MountedDisk {
  const backing = `${dir}.backing`;
  mkdirSync(backing, { recursive: true });
  mkdirSync(dir, { recursive: true });
  run('bindfs', ['--chmod-deny', backing, dir]);
  return {
    dir,
    unmount() {
      run('umount', [dir]);
      rmSync(backing, { recursive: true, force: true });
    },
  };
}

/**
 * Mounts at `dir` (made here) a view of a fresh folder beside it in which everything is owned by
 * `uid` (its group too) and no chown succeeds (EPERM), as on an exFAT disk mounted for a user.
 */
export function mountRefusingOwners(dir: string, uid: number): MountedDisk {
  const backing = `${dir}.backing`;
  mkdirSync(backing, { recursive: true });
  mkdirSync(dir, { recursive: true });
  run('bindfs', [
    `--force-user=${uid}`,
    `--force-group=${uid}`,
    '--chown-deny',
    '--chgrp-deny',
    backing,
    dir,
  ]);
  return {
    dir,
    unmount() {
      run('umount', [dir]);
      rmSync(backing, { recursive: true, force: true });
    },
  };
}

/**
 * Mounts at `dir` (made here) a tmpfs of `sizeMiB`, or a ramfs (which has no size limit).
 */
export function mountMemoryDisk(dir: string, type: 'tmpfs' | 'ramfs', sizeMiB = 0): MountedDisk {
  mkdirSync(dir, { recursive: true });
  run('mount', ['-t', type, ...(type === 'tmpfs' ? ['-o', `size=${sizeMiB}m`] : []), type, dir]);
  return {
    dir,
    unmount() {
      run('umount', [dir]);
    },
  };
}

/** Makes and mounts an ext4 disk of `sizeMiB` at `dir` (made here); its image sits beside it. */
export function mountExt4(dir: string, sizeMiB: number): MountedDisk {
  const image = `${dir}.img`;
  writeFileSync(image, '');
  truncateSync(image, sizeMiB * 1024 * 1024);
  // No reserved blocks: as root, the restore could otherwise write into the last 5 %.
  run('mkfs.ext4', ['-q', '-m', '0', image]);
  mkdirSync(dir, { recursive: true });
  run('mount', ['-o', 'loop', image, dir]);
  return {
    dir,
    unmount() {
      run('umount', [dir]);
      rmSync(image, { force: true });
    },
  };
}
