import { formatTime } from '../main/api/index.ts';
import type { ServiceWait } from '../main/index.ts';

// What `canopy backup`, `restore` and `verify` tell on stderr while they wait out an outage of
// the service they reached (main/service/service-outage.ts): once as the wait starts, until
// when, and once the service answers again; the progress line, cleared first, comes back with
// the next report. Not with --json, whose stderr holds the one JSON line of a failure and
// nothing else.

/** The onServiceWait of a backup, a restore or a verify, as a request's options. */
export function waitShown(
  json: boolean,
  progress: { done(): void },
): { onServiceWait?: (wait: ServiceWait) => void } {
  if (json) return {};
  const onServiceWait = (wait: ServiceWait): void => {
    progress.done();
    process.stderr.write(
      wait.state === 'waiting'
        ? `canopy: ${wait.error.message}; waiting for it until ${formatTime(wait.givesUpAt)} (Ctrl-C stops)\n`
        : 'canopy: reached the server again; going on\n',
    );
  };
  return { onServiceWait };
}
