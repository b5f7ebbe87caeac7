import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';

// A process whose clock is off, as a computer whose clock is set wrong: libfaketime (Debian's
// `libfaketime`, which .ci/run installs) preloaded, moving every wall-clock read by `offset`
// (e.g. "+13h", "-2h"). Monotonic time is left alone, as a wrong clock leaves it.

/** The library's path; throws, naming the package, when it is not installed. */
function libfaketime(): string {
  const lib = '/usr/lib';
  // Debian puts it under the architecture's folder (x86_64-linux-gnu, aarch64-linux-gnu).
  for (const dir of readdirSync(lib)) {
    const candidate = path.join(lib, dir, 'faketime', 'libfaketime.so.1');
    if (existsSync(candidate)) return candidate;
  }
  throw new Error('libfaketime is not installed (apt-get install libfaketime)');
}

/** The environment that runs a process with its clock moved by `offset`. */
export function clockOffEnv(offset: string): Record<string, string> {
  return {
    LD_PRELOAD: libfaketime(),
    FAKETIME: offset,
    FAKETIME_DONT_FAKE_MONOTONIC: '1',
  };
}
