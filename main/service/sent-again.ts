// Whether a request was sent again after a retryable failure. Some of those failures (a
// connection that broke before the answer came) may have reached the server, so an answer to a
// request sent again may tell of what the attempt before did: a code spent, a thing deleted.

export interface SentAgain {
  /** For the request's `beforeRetry`: notes the attempt about to be sent again. */
  readonly beforeRetry: () => Promise<void>;
  /** Whether any attempt after the first was sent. */
  readonly happened: () => boolean;
}

/** A watch on one request's attempts. */
export function watchSentAgain(): SentAgain {
  let sentAgain = false;
  return {
    beforeRetry: () => {
      sentAgain = true;
      return Promise.resolve();
    },
    happened: () => sentAgain,
  };
}
