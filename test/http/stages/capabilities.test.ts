/**
 * The capabilities stage on its own loopback exchange: a render whose options this ffmpeg cannot
 * honour is 501 `unsupported_option` naming the option and the part (cached 60 s like a 422),
 * before anything else is asked of the system; what it can do, an `/info` route, and a proxy
 * with no capabilities member go on untouched.
 */

import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { ANSWERED } from '../../../src/http/exchange.js';
import { capabilitiesStage } from '../../../src/http/stages/capabilities.js';
import { optionsStage, type ParsedRoute } from '../../../src/http/stages/options.js';
import { EncoderCapabilities, readCapabilities } from '../../../src/workers/capabilities.js';
import { contextOf, exchange, NOT_ANSWERED } from './harness.js';

const require = createRequire(import.meta.url);
const NPM_FFMPEG = (require('@ffmpeg-installer/ffmpeg') as { path: string }).path;

function parsed(rest: string): ParsedRoute {
  const x = { res: { writeHead() {}, end() {} } } as never;
  return optionsStage(x, rest) as ParsedRoute;
}

describe('capabilities stage', () => {
  it('answers 501 unsupported_option for what the npm fallback lacks, and only that', async () => {
    const capabilities = new EncoderCapabilities(await readCapabilities(NPM_FFMPEG));
    const ctx = contextOf({}, { capabilities });
    const refused = await exchange((x) =>
      capabilitiesStage(x, ctx, parsed('/f:mp3/enhance:voice/plain/local://a.wav')),
    );
    expect(refused.status).toBe(501);
    expect(refused.result).toBe(ANSWERED);
    expect(refused.headers['cache-control']).toBe('max-age=60');
    expect(refused.headers['content-type']).toBe('application/json');
    expect(JSON.parse(refused.body)).toEqual({
      error: 'unsupported_option',
      message:
        'enhance:voice needs the ffmpeg filter "deesser", which this server\'s ffmpeg does not have',
    });
    const head = await exchange(
      (x) => capabilitiesStage(x, ctx, parsed('/f:opus/enhance:voice/plain/local://a.wav')),
      { method: 'HEAD' },
    );
    expect(head.status).toBe(501);
    expect(head.body).toBe('');
    for (const rest of [
      '/f:opus/norm:ebu/fade:1:1/t:0:3/plain/local://a.wav',
      '/info/plain/local://a.wav',
    ]) {
      const passed = await exchange((x) => capabilitiesStage(x, ctx, parsed(rest)));
      expect(passed.status, rest).toBe(NOT_ANSWERED);
      expect(passed.result, rest).toBeUndefined();
    }
  });

  it('refuses nothing without a capabilities member', async () => {
    const passed = await exchange((x) =>
      capabilitiesStage(x, contextOf(), parsed('/f:mp3/enhance:voice/plain/local://a.wav')),
    );
    expect(passed.status).toBe(NOT_ANSWERED);
  });
});
