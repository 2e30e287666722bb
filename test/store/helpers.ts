/** Small helpers the store tests share: chunked sources, body collection, a metadata sample. */
import type { StoredBody, VariantMetadata } from '../../src/store/types.js';

export const META: VariantMetadata = {
  contentType: 'audio/mpeg',
  cacheControl: 'public, max-age=31536000, immutable, no-transform',
};

/** `data` as an async stream of `size`-byte chunks. */
export async function* chunksOf(data: Buffer, size = 64 * 1024): AsyncGenerator<Buffer> {
  for (let i = 0; i < data.length; i += size) yield data.subarray(i, i + size);
}

/** The bytes of a stored body, whether streamed or already in memory. */
export async function readBody(body: StoredBody | undefined): Promise<Buffer> {
  if (body === undefined) throw new Error('no body');
  if (body.type === 'buffer') return body.data;
  const parts: Buffer[] = [];
  for await (const c of body.stream as AsyncIterable<Buffer>) parts.push(c);
  return Buffer.concat(parts);
}
