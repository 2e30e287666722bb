// Comlink ships `node-adapter.d.ts` beside `node-adapter.mjs`, but NodeNext resolution looks for
// `node-adapter.d.mts` and reports TS7016. This declares the one default export we use.
declare module 'comlink/dist/esm/node-adapter.mjs' {
  import type { Endpoint } from 'comlink';

  /** The subset of a worker_threads `MessagePort` the adapter needs. */
  export interface NodeEndpoint {
    postMessage(message: unknown, transfer?: readonly unknown[]): void;
    on(type: string, listener: (...args: any[]) => void): unknown;
    off(type: string, listener: (...args: any[]) => void): unknown;
    start?: () => void;
  }

  /** Adapts a Node `MessagePort` (or `Worker`) to the DOM-style endpoint Comlink expects. */
  export default function nodeEndpoint(nep: NodeEndpoint): Endpoint;
}
