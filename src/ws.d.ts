// `ws` (the WebSocket server under `@statelyai/inspect`'s relay) ships no types and
// `@types/ws` is not installed; this declares the part the inspector relay uses.
declare module 'ws' {
  import type { EventEmitter } from 'node:events';
  import type { IncomingMessage } from 'node:http';
  import type { Duplex } from 'node:stream';

  export class WebSocket extends EventEmitter {
    static readonly OPEN: 1;
    readonly readyState: number;
    send(data: string): void;
    terminate(): void;
    close(): void;
  }

  export class WebSocketServer extends EventEmitter {
    constructor(options: { noServer: true });
    readonly clients: Set<WebSocket>;
    handleUpgrade(
      req: IncomingMessage,
      socket: Duplex,
      head: Buffer,
      done: (ws: WebSocket) => void,
    ): void;
    close(): void;
  }
}
