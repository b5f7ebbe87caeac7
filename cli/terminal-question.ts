import { createInterface } from 'node:readline';

// A question asked at the terminal before a command does what cannot be undone (a bucket
// deleted, this device revoked): on stderr, so that stdout stays the command's result.

/** How a command that cannot be undone was asked for. */
export interface GoAhead {
  /** --yes: done without asking. */
  readonly yes: boolean;
  /** Whether the user can be asked (canAsk). */
  readonly canAsk: boolean;
}

/** Whether the user can be asked: stdin and stderr are a terminal, and the output not JSON. */
export function canAsk(json: boolean): boolean {
  return !json && process.stdin.isTTY && process.stderr.isTTY;
}

/** One line typed at the terminal after `question`; null when the input ends first (Ctrl-D). */
export function askLine(question: string): Promise<string | null> {
  const reader = createInterface({ input: process.stdin, output: process.stderr });
  return new Promise((resolve) => {
    let answered = false;
    reader.on('close', () => {
      if (!answered) resolve(null);
    });
    reader.question(question, (line) => {
      answered = true;
      reader.close();
      resolve(line);
    });
  });
}
