import { writeFileSync } from 'node:fs';
import { it } from 'vitest';
import { formatRecording } from '../src/core/recording.js';
import { get, startHarness } from './integration/harness.js';
it('dump', async () => {
  const h = await startHarness({ AP_MAX_CONCURRENCY: '1', AP_FLIGHT_RECORDER: '5000' });
  await Promise.all([get(h.url, '/insecure/f:mp3/t:0:1/plain/local://stereo.wav'), get(h.url, '/insecure/f:mp3/t:0:1/plain/local://stereo.wav')]);
  writeFileSync('/tmp/rec/a.ndjson', formatRecording(h.proxy.recorder!.recording('x')));
  await h.close();
}, 60000);
