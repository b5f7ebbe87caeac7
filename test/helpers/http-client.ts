// Minimal HTTP calls for tests: every response is read whole, and JSON is parsed when present.

export interface TestResponse {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  readonly bytes: Uint8Array;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests index into bodies freely
  readonly json: any;
}

export interface CallOptions {
  token?: string;
  json?: unknown;
  body?: Uint8Array | string;
  contentType?: string;
  headers?: Record<string, string>;
}

export async function call(
  method: string,
  url: string,
  options: CallOptions = {},
): Promise<TestResponse> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) headers['authorization'] = `Bearer ${options.token}`;
  let body: Uint8Array | string | undefined = options.body;
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    headers['content-type'] = 'application/json';
  }
  if (options.contentType !== undefined) headers['content-type'] = options.contentType;
  const response = await fetch(url, { method, headers, ...(body === undefined ? {} : { body }) });
  const bytes = new Uint8Array(await response.arrayBuffer());
  const type = response.headers.get('content-type') ?? '';
  // Binary bodies (blocks, CARs) are not decoded: tests compare their bytes.
  const isText = type.startsWith('application/json') || type.startsWith('text/');
  const text = isText ? new TextDecoder().decode(bytes) : '';
  const json: unknown =
    type.startsWith('application/json') && text.length > 0 ? JSON.parse(text) : undefined;
  return { status: response.status, headers: response.headers, text, bytes, json };
}
