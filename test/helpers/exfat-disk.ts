import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, truncateSync, writeFileSync } from 'node:fs';

// A small exFAT disk, as on a USB stick: an image file formatted by mkfs.exfat (Debian's
// exfatprogs), attached to a loop device and mounted through FUSE (exfat-fuse), since this
// kernel has no exFAT or FAT module. Like the real thing it refuses names holding : ? * " < > |
// or \, cannot hold symbolic links, and compares names without regard to case.

export interface ExfatDisk {
  /** Where the disk is mounted. */
  readonly dir: string;
  unmount(): void;
}

function run(command: string, args: readonly string[]): string {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  if (result.status !== 0)
    throw new Error(
      `${command} ${args.join(' ')} failed: ${result.error?.message ?? result.stderr}`,
    );
  return result.stdout.trim();
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
  return {
    dir,
    unmount() {
      run('umount', [dir]);
      run('losetup', ['--detach', device]);
      rmSync(image, { force: true });
    },
  };
}
