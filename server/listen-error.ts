// Why `canopy-server serve` could not listen, in words that say what to do: Node's own
// (`listen EADDRINUSE: address already in use 127.0.0.1:8750`) name the system call.

export type ListenErrorCode = 'port_in_use' | 'port_not_allowed' | 'address_not_here';

export class ListenError extends Error {
  constructor(
    readonly code: ListenErrorCode,
    message: string,
    options: { cause: unknown },
  ) {
    super(message, options);
    this.name = 'ListenError';
  }
}

/** `error`, from listening on `host`:`port`, told as a ListenError when it is one of those. */
export function listenError(error: unknown, host: string, port: number): unknown {
  switch ((error as NodeJS.ErrnoException).code) {
    case 'EADDRINUSE':
      return new ListenError(
        'port_in_use',
        `port ${port} on ${host} is taken by another program (a canopy-server already running there, perhaps); stop it, or choose another port with --port`,
        { cause: error },
      );
    case 'EACCES':
      return new ListenError(
        'port_not_allowed',
        `this user may not listen on port ${port} (ports below 1024 are for root); choose another with --port`,
        { cause: error },
      );
    case 'EADDRNOTAVAIL':
      return new ListenError(
        'address_not_here',
        `${host} is not an address of this computer; --host takes one of its own (127.0.0.1 by default, 0.0.0.0 for all)`,
        { cause: error },
      );
    default:
      return error;
  }
}
