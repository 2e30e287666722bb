/**
 * Reads one HTTP/1.1 answer from the whole byte stream of a `Connection: close` exchange: the
 * status, the headers, the body (de-chunked), and whether it was complete. The burst's load
 * generator speaks HTTP over raw sockets with this, because Node's client costs several times
 * the CPU per request, and on a two-core machine every millisecond the load generator spends is
 * taken from the proxy it measures.
 *
 * **Complete** means: a chunked body ended with its last chunk, a `Content-Length` body has every
 * byte, and anything else (no framing) ended with the connection, which is all it can do.
 */

export interface RawAnswer {
  readonly status: number;
  /** Header names lowercased; a repeated header keeps its last value. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
  readonly complete: boolean;
}

const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');

/** `null` when the bytes do not hold a whole status line and header block. */
export function readAnswer(bytes: Buffer): RawAnswer | null {
  const headEnd = bytes.indexOf(HEAD_END);
  if (headEnd < 0) return null;
  const lines = bytes.subarray(0, headEnd).toString('latin1').split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
  if (!status) return null;
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0)
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const rest = bytes.subarray(headEnd + HEAD_END.length);
  if (headers['transfer-encoding']?.toLowerCase() === 'chunked') {
    const { body, complete } = dechunk(rest);
    return { status: Number(status[1]), headers, body, complete };
  }
  const length = headers['content-length'];
  if (length !== undefined) {
    const n = Number(length);
    return {
      status: Number(status[1]),
      headers,
      body: rest.subarray(0, n),
      complete: rest.length >= n,
    };
  }
  return { status: Number(status[1]), headers, body: rest, complete: true };
}

/** The data of a chunked body, and whether its zero-length last chunk arrived. */
function dechunk(bytes: Buffer): { body: Buffer; complete: boolean } {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = bytes.indexOf(CRLF, at);
    if (lineEnd < 0) return { body: Buffer.concat(parts), complete: false };
    const size = Number.parseInt(bytes.subarray(at, lineEnd).toString('latin1'), 16);
    if (!Number.isFinite(size)) return { body: Buffer.concat(parts), complete: false };
    if (size === 0) {
      // The last chunk, then (no trailers here) the final CRLF.
      const complete = bytes.length >= lineEnd + 2 * CRLF.length;
      return { body: Buffer.concat(parts), complete };
    }
    const dataEnd = lineEnd + CRLF.length + size;
    if (bytes.length < dataEnd + CRLF.length) {
      parts.push(bytes.subarray(lineEnd + CRLF.length, Math.min(dataEnd, bytes.length)));
      return { body: Buffer.concat(parts), complete: false };
    }
    parts.push(bytes.subarray(lineEnd + CRLF.length, dataEnd));
    at = dataEnd + CRLF.length;
  }
}
