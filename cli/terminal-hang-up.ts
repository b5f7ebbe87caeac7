import { closeSync } from 'node:fs';
import { isatty } from 'node:tty';

// A command whose terminal hangs up (an ssh session dropped, a terminal window closed) may run
// on and end as it should: a backup or a restore stops cleanly on the SIGHUP (signal-stop.ts),
// and its writes to the terminal, which fail with EIO from then on, are dropped
// (closed-output.ts). But Node 20, on its way out, sets each terminal it started on back to the
// modes it found, and aborts when the kernel refuses that with EIO (nodejs/node#51519, fixed in
// Node 24 by #58200): a core dump, a crash report on desktops that collect them, and exit 134
// in place of the command's own status. Node skips a descriptor that is closed by then, so a
// terminal found hung up as the process exits is closed first. A hung-up terminal answers no
// terminal request, which is how isatty(3) tells it from one still there.

/** Closes, as the process exits, each of its standard descriptors whose terminal hung up. */
export function closeHungUpTerminalOnExit(): void {
  const onTerminal = [0, 1, 2].filter((fd) => isatty(fd));
  if (onTerminal.length === 0) return;
  process.on('exit', () => {
    for (const fd of onTerminal) {
      if (isatty(fd)) continue;
      try {
        closeSync(fd);
      } catch (error) {
        // Closed already (isatty says no to a closed descriptor too): Node skips it as well.
        if ((error as NodeJS.ErrnoException).code !== 'EBADF') throw error;
      }
    }
  });
}
