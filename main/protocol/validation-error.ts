/**
 * A request value that breaks the wire contract. `field` names the offending field or part
 * (dotted for nested values, e.g. `valid_keys.3`); `message` is the spec's `msg`, which always
 * starts with the field name (§2.5: `"name: must be 1-64 characters"`).
 */
export class ValidationError extends Error {
  readonly field: string;
  readonly reason: string;

  constructor(field: string, reason: string) {
    super(`${field}: ${reason}`);
    this.name = 'ValidationError';
    this.field = field;
    this.reason = reason;
  }
}
