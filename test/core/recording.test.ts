import { describe, expect, it } from 'vitest';
import {
  formatRecording,
  MAX_RECORDING_BYTES,
  parseRecording,
  RECORDING_FORMAT,
  RECORDING_VERSION,
  type Recording,
  RecordingError,
} from '../../src/core/recording.js';

const sample: Recording = {
  header: {
    format: RECORDING_FORMAT,
    version: RECORDING_VERSION,
    reason: 'download',
    timeOrigin: 1_764_776_000_000.5,
    capacity: 16,
    dropped: 2,
    actors: [
      { actor: 'a1', chart: 'semaphore', name: 'semaphore', parent: null },
      { actor: 'a2', chart: null, name: 'render', parent: 'a1' },
    ],
    initial: [
      {
        seq: 2,
        t: 0.5,
        kind: 'snapshot',
        actor: 'a1',
        status: 'active',
        value: 'ready',
        details: { held: 0 },
      },
    ],
  },
  entries: [
    { seq: 3, t: 1, kind: 'actor', actor: 'a2' },
    {
      seq: 4,
      t: 1.5,
      kind: 'event',
      actor: 'a1',
      source: 'a2',
      event: { type: 'request', id: 'render-1' },
    },
    {
      seq: 5,
      t: 2,
      kind: 'snapshot',
      actor: 'a1',
      status: 'active',
      value: 'ready',
      details: { held: 1, holders: 'render-1' },
    },
    {
      seq: 6,
      t: 2.5,
      kind: 'telemetry',
      channel: 'audio_proxy.semaphore.acquired',
      data: { held: 1, wait: 0 },
    },
    { seq: 7, t: 3, kind: 'invariant', check: 'queue_bound', actor: 'a1', message: 'queued 3 > 2' },
  ],
};

const header = JSON.stringify(sample.header);

describe('the recording format', () => {
  it('reads back exactly what it wrote', () => {
    const text = formatRecording(sample);
    expect(text.split('\n')[0]).toContain(`"version":${RECORDING_VERSION}`);
    expect(parseRecording(text)).toEqual(sample);
  });

  it.each([
    ['an empty file', '', /empty/],
    ['another format', '{"format":"other","version":1}', /not an audio-proxy-recording/],
    [
      'a future version',
      header.replace('"version":1', '"version":2'),
      /version 2 is not supported/,
    ],
    ['a line that is not JSON', `${header}\n{nope`, /line 2: not JSON/],
    ['an unknown kind', `${header}\n{"seq":1,"t":1,"kind":"exec","actor":"a1"}`, /unknown kind/],
    [
      'a nested payload',
      `${header}\n{"seq":1,"t":1,"kind":"event","actor":"a1","source":null,"event":{"type":"x","deep":{"a":1}}}`,
      /event.deep/,
    ],
    [
      'a __proto__ key',
      `${header}\n{"seq":1,"t":1,"kind":"telemetry","channel":"c","data":{"__proto__":{"polluted":1}}}`,
      /forbidden key __proto__/,
    ],
    [
      'an event without a type',
      `${header}\n{"seq":1,"t":1,"kind":"event","actor":"a1","source":null,"event":{}}`,
      /event.type/,
    ],
    [
      'a non-finite time',
      `${header}\n{"seq":1,"t":"soon","kind":"actor","actor":"a1"}`,
      /t is not a finite number/,
    ],
    [
      'an actor id that is not a string',
      `${header}\n{"seq":1,"t":1,"kind":"actor","actor":{"toString":1}}`,
      /actor is not a string/,
    ],
  ])('refuses %s', (_what, text, message) => {
    expect(() => parseRecording(text)).toThrow(RecordingError);
    expect(() => parseRecording(text)).toThrow(message);
  });

  it('refuses a file over the size bound before parsing it', () => {
    expect(() => parseRecording(' '.repeat(MAX_RECORDING_BYTES + 1))).toThrow(/too large/);
  });

  it('never lets a payload pollute Object.prototype', () => {
    const text = `${header}\n{"seq":1,"t":1,"kind":"snapshot","actor":"a1","status":"active","value":"","details":{"constructor":"x"}}`;
    expect(() => parseRecording(text)).toThrow(/forbidden/);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
