// m3u8-parser ships no types; this declares the part test/integration/hls.test.ts uses.
declare module 'm3u8-parser' {
  interface Segment {
    duration: number;
    uri: string;
    timeline: number;
    map?: { uri: string };
    discontinuity?: boolean;
  }
  interface Manifest {
    version?: number;
    targetDuration?: number;
    playlistType?: string;
    mediaSequence?: number;
    independentSegments?: boolean;
    endList?: boolean;
    segments: Segment[];
    discontinuityStarts: number[];
  }
  export class Parser {
    manifest: Manifest;
    on(event: 'warn' | 'info', listener: (e: { message: string }) => void): void;
    push(chunk: string): void;
    end(): void;
  }
}
